# EMLX's pattern, per call (bindings/elixir/bench/run --emlx): fetch the
# compiled closure of a call site, a closure that holds a native program
# (a reference CCacheTest.Native runs: x -> 3 * x + 4), and run it.  From
# P client processes at once (aggregate ns per call), on a VM with +S 2:2
# and 10,000 idle processes (a server's request processes: what a global
# GC pass of :persistent_term has to visit), with and without churn:
#
#   ccache           CCache.fetch (copies the small closure) + the call;
#                    churn: CCache.put of a new site (max_items 1024 evicts)
#   genserver_ets    EMLX's own mechanism: :ets.lookup on a read_concurrency
#                    table + the call; churn: GenServer.call to the owner,
#                    which inserts and deletes the oldest past 1024
#   persistent_term  :persistent_term.get + the call; churn: put of a new
#                    site and erase of the oldest past 1024 (each erase of a
#                    fun is a global GC pass)
#   native_call      the run NIF alone (the floor: one NIF call)
#
# Churn: one new site per 100 calls of each client.  Lookups take one of
# the 448 sites before the 64 newest ids (alive: the bound is 1024, and
# the newest ids may be reserved by other clients but not put yet).  Each figure is the median of the
# repetitions; a repetition is P clients x N calls.
#
# usage: emlx_pattern.exs [--quick] [--json] [--reps N] [--procs P]
Code.require_file("../test/support/big.exs", __DIR__)

defmodule EmlxPattern do
  alias CCacheTest.Native

  @window 512
  @max 1024

  # ---- the lookups: each returns the closure of site id, or nil
  def get(:ccache, id, _t) do
    case CCache.fetch({:site, id}) do
      {:ok, f} -> f
      _ -> nil
    end
  end

  def get(:genserver_ets, id, t) do
    case :ets.lookup(t, id) do
      [{_, f}] -> f
      [] -> nil
    end
  end

  def get(:persistent_term, id, _t), do: :persistent_term.get({__MODULE__, id}, nil)

  # ---- the churn: a new site
  def add(:ccache, id, f, _owner), do: :ok = CCache.put({:site, id}, f)
  def add(:genserver_ets, id, f, owner), do: :ok = GenServer.call(owner, {:put, id, f})

  def add(:persistent_term, id, f, _owner) do
    :persistent_term.put({__MODULE__, id}, f)
    if id >= @max, do: :persistent_term.erase({__MODULE__, id - @max})
    :ok
  end

  # ---- the EMLX-style owner of the ETS table (FIFO past @max)
  def owner(t) do
    receive do
      {:"$gen_call", from, {:put, id, f}} ->
        :ets.insert(t, {id, f})
        if id >= @max, do: :ets.delete(t, id - @max)
        GenServer.reply(from, :ok)
        owner(t)
    end
  end

  # ---- one client: n calls; every `churn` calls a new site (0: none)
  def client(_m, 0, _c, _next, _t, _o, _f, misses), do: misses

  def client(m, n, churn, next, t, o, f, misses) do
    if churn > 0 and rem(n, churn) == 0 do
      id = :atomics.add_get(next, 1, 1) - 1
      add(m, id, f, o)
    end

    # the newest ids may be reserved by other clients and not put yet
    newest = :atomics.get(next, 1) - 1 - 64
    id = newest - rem(n, @window - 64)

    misses =
      case get(m, id, t) do
        nil ->
          misses + 1

        fun ->
          13 = fun.(3)
          misses
      end

    client(m, n - 1, churn, next, t, o, f, misses)
  end

  def native_client(0, _r), do: 0

  def native_client(n, r) do
    13 = Native.run(r, 3)
    native_client(n - 1, r)
  end

  # P clients at once, n calls each: {ns per call (aggregate), misses}
  def timed(procs, run) do
    me = self()
    go = make_ref()

    pids =
      for _ <- 1..procs do
        spawn_link(fn ->
          receive do: (^go -> :ok)
          send(me, {:done, self(), run.()})
        end)
      end

    t0 = System.monotonic_time(:nanosecond)
    Enum.each(pids, &send(&1, go))
    misses = for p <- pids, reduce: 0, do: (acc -> receive(do: ({:done, ^p, x} -> acc + x)))
    {System.monotonic_time(:nanosecond) - t0, misses}
  end

  def median(xs), do: Enum.at(Enum.sort(xs), div(length(xs), 2))

  def main(args) do
    {opts, _, _} = OptionParser.parse(args, strict: [quick: :boolean, json: :boolean, reps: :integer, procs: :integer])
    quick = Keyword.get(opts, :quick, false)
    reps = Keyword.get(opts, :reps, if(quick, do: 1, else: 5))
    procs = Keyword.get(opts, :procs, 8)
    n = if quick, do: 2_000, else: 100_000
    idle = if quick, do: 1_000, else: 10_000

    _idle = for i <- 1..idle, do: spawn(fn -> _heap = Enum.to_list(1..(rem(i, 50) + 10)); receive do: (:never -> :ok) end)
    {:ok, _} = CCache.start_link(max_items: @max)
    :ok = CCache.put(:prog, Native.compile(3, 4))
    {:ok, r} = CCache.fetch(:prog, as: :ref)
    f = fn x -> Native.run(r, x) end
    t = :ets.new(:emlx_sites, [:public, :set, read_concurrency: true])
    o = spawn_link(fn -> owner(t) end)
    :ets.give_away(t, o, nil)

    methods = [:ccache, :genserver_ets, :persistent_term]
    next = :atomics.new(1, [])

    for m <- methods, id <- 0..(@max - 1), do: add(m, id, f, o)
    :atomics.put(next, 1, @max)

    results =
      for _rep <- 1..reps, churn <- [0, 100], m <- methods ++ [:native_call], reduce: %{} do
        acc ->
          run =
            if m == :native_call,
              do: fn -> native_client(n, r) end,
              else: fn -> client(m, n, churn, next, t, o, f, 0) end

          # every method adds sites under the same ids: keep them in step
          {ns, misses} = timed(procs, run)
          if churn > 0, do: resync(methods -- [m], next, f, o)
          Map.update(acc, {m, churn}, [{ns / (procs * n), misses}], &[{ns / (procs * n), misses} | &1])
      end

    fig = fn m, churn -> results[{m, churn}] |> Enum.map(&elem(&1, 0)) |> median() end
    miss = fn m, churn -> results[{m, churn}] |> Enum.map(&elem(&1, 1)) |> Enum.sum() end
    floor = fig.(:native_call, 0)

    rows =
      for churn <- [0, 100], m <- methods do
        %{method: m, churn: churn, ns_per_call: fig.(m, churn), misses: miss.(m, churn),
          vs_native_call: fig.(m, churn) / floor}
      end

    ratio = fn churn, other -> fig.(:ccache, churn) / fig.(other, churn) end

    if Keyword.get(opts, :json, false) do
      IO.puts(CCacheBench.to_json(%{
        procs: procs, calls_per_proc: n, reps: reps, idle_processes: idle, native_call_ns: floor,
        rows: Enum.map(rows, &Map.update!(&1, :method, fn a -> Atom.to_string(a) end)),
        ccache_over_persistent_term_churn: ratio.(100, :persistent_term),
        ccache_over_persistent_term_no_churn: ratio.(0, :persistent_term),
        ccache_over_genserver_ets_churn: ratio.(100, :genserver_ets)
      }))
    else
      IO.puts("EMLX pattern: #{procs} processes x #{n} calls, #{reps} reps (median), #{idle} idle processes, +S 2:2")
      IO.puts("| method | churn (new site per calls) | ns per call | / native call | misses |")
      IO.puts("|---|---|---|---|---|")

      for row <- rows do
        c = if row.churn == 0, do: "none", else: "1 per #{row.churn}"
        IO.puts("| #{row.method} | #{c} | #{fmt(row.ns_per_call)} | #{fmt(row.vs_native_call)}x | #{row.misses} |")
      end

      IO.puts("| native_call (the run NIF alone) | none | #{fmt(floor)} | 1.0x | 0 |")
      IO.puts("ccache / persistent_term: #{fmt(ratio.(0, :persistent_term))}x without churn, #{fmt(ratio.(100, :persistent_term))}x with churn; " <>
                "ccache / genserver_ets with churn: #{fmt(ratio.(100, :genserver_ets))}x")
    end
  end

  # After one method's churn, the others get the same new ids.
  defp resync(others, next, f, o) do
    top = :atomics.get(next, 1)
    for m <- others, id <- (top - @window)..(top - 1), do: add(m, id, f, o)
  end

  defp fmt(x), do: :erlang.float_to_binary(x * 1.0, decimals: 1)
end

defmodule CCacheBench do
  def to_json(m) when is_map(m), do: "{" <> Enum.map_join(m, ", ", fn {k, v} -> to_json(to_string(k)) <> ": " <> to_json(v) end) <> "}"
  def to_json(l) when is_list(l), do: "[" <> Enum.map_join(l, ", ", &to_json/1) <> "]"
  def to_json(x) when is_integer(x), do: Integer.to_string(x)
  def to_json(x) when is_float(x), do: :erlang.float_to_binary(x, [:short])
  def to_json(a) when is_atom(a), do: to_json(Atom.to_string(a))
  def to_json(s) when is_binary(s), do: inspect(s)
end

EmlxPattern.main(System.argv())
