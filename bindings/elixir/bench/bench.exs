# The Elixir binding's benchmark (run it through bindings/elixir/bench/run).
#
# Per lookup, for a small closure and for the 431,971-word closure of EMLX's
# SmolLM2 report, with 1 and 2 client processes (the VM started with
# +S 2:2; 2 clients: aggregate lookups/s): ets:lookup (EMLX's read path
# before its review), gen_server:call to the table's owner (after it),
# persistent_term.get (the zero-copy baseline that cannot be bounded,
# evicted or counted), CCache.fetch copying, CCache.fetch by reference, and
# fetch + use of a native program by reference (CCacheTest.Native: a NIF
# whose program is x -> a * x + b) beside the native call alone, both as
# CCache.fetch(key, as: :ref) then the run NIF (two NIF calls) and as a run
# NIF that looks the program up itself (ccache_nif.h's lend: one call).
#
# Each repetition measures every method back to back, each as the fastest
# of 5 bursts (the burst least disturbed by the rest of the machine); ratios
# are taken within a repetition and reported as median [min, max] over them.
#
# usage: bench.exs [--quick] [--json] [--reps N]  (default 7 repetitions, 2 with --quick)
Code.require_file("../test/support/big.exs", __DIR__)

defmodule CCacheBench do
  alias CCacheTest.Native

  # ---- one loop per method (no closure call in the loop)
  def l_ets(0, _t, _k), do: :ok

  def l_ets(n, t, k) do
    [{_, _}] = :ets.lookup(t, k)
    l_ets(n - 1, t, k)
  end

  def l_call(0, _s, _k), do: :ok

  def l_call(n, s, k) do
    {:ok, _} = GenServer.call(s, {:fetch, k})
    l_call(n - 1, s, k)
  end

  def l_pt(0, _k), do: :ok

  def l_pt(n, k) do
    _ = :persistent_term.get(k)
    l_pt(n - 1, k)
  end

  def l_copy(0, _k), do: :ok

  def l_copy(n, k) do
    {:ok, _} = CCache.fetch(k)
    l_copy(n - 1, k)
  end

  def l_ref(0, _k), do: :ok

  def l_ref(n, k) do
    {:ok, _} = CCache.fetch(k, as: :ref)
    l_ref(n - 1, k)
  end

  def l_use(0, _k), do: :ok

  def l_use(n, k) do
    {:ok, r} = CCache.fetch(k, as: :ref)
    7 = Native.run(r, 1)
    l_use(n - 1, k)
  end

  def l_lend(0, _k), do: :ok

  def l_lend(n, k) do
    7 = Native.run_key(CCache, k, 1)
    l_lend(n - 1, k)
  end

  def l_native(0, _p), do: :ok

  def l_native(n, p) do
    7 = Native.run_own(p, 1)
    l_native(n - 1, p)
  end

  # ---- the owner of the ETS table, as EMLX's reviewed CompileCache
  def owner_loop(t) do
    receive do
      {:"$gen_call", from, {:fetch, k}} ->
        [{_, v}] = :ets.lookup(t, k)
        GenServer.reply(from, {:ok, v})
        owner_loop(t)

      {:"ETS-TRANSFER", _, _, _} ->
        owner_loop(t)
    end
  end

  # Run `run.(n / @bursts)` in `procs` fresh client processes at once,
  # @bursts times; seconds of wall time of the fastest burst (from the start
  # signal to the last client done) times @bursts.  The fastest burst is the
  # one least disturbed by other processes of the machine.
  @bursts 5
  def timed(procs, n, run) do
    me = self()
    per = max(div(n, @bursts), 1)

    pids =
      for _ <- 1..procs do
        spawn_link(fn ->
          run.(max(div(per, 10), 1))
          client(me, per, run, @bursts)
        end)
      end

    best =
      Enum.reduce(1..@bursts, :infinity, fn _, best ->
        # each client is waiting for :go once its previous burst is done
        Enum.each(pids, &wait_waiting/1)
        t0 = System.monotonic_time()
        Enum.each(pids, &send(&1, :go))
        Enum.each(pids, fn p -> receive do: ({:done, ^p} -> :ok) end)
        min(best, System.monotonic_time() - t0)
      end)

    System.convert_time_unit(best, :native, :nanosecond) * @bursts / 1.0e9 * (n / (per * @bursts))
  end

  defp client(_me, _per, _run, 0), do: :ok

  defp client(me, per, run, left) do
    receive do
      :go -> :ok
    end

    run.(per)
    send(me, {:done, self()})
    client(me, per, run, left - 1)
  end

  defp wait_waiting(p) do
    case Process.info(p, :status) do
      {:status, :waiting} -> :ok
      _ -> Process.sleep(1) && wait_waiting(p)
    end
  end

  def median(xs), do: Enum.at(Enum.sort(xs), div(length(xs), 2))

  def main(args) do
    quick = "--quick" in args
    json = "--json" in args
    reps =
      case Enum.drop_while(args, &(&1 != "--reps")) do
        ["--reps", n | _] -> String.to_integer(n)
        _ -> if quick, do: 2, else: 7
      end
    fast_n = if quick, do: 20_000, else: 200_000
    slow_n = if quick, do: 6, else: 40

    big = CCacheTest.Big.closure(431_971)
    small = CCacheTest.Big.small_closure()
    {:ok, _} = CCache.start_link([])
    t = :ets.new(:bench, [:set, :protected, read_concurrency: true])
    ks = CCache.key(:small)
    kl = CCache.key(:large)
    kp = CCache.key(:program)
    :ets.insert(t, [{ks, small}, {kl, big}])
    owner = spawn_link(fn -> owner_loop(t) end)
    :ets.give_away(t, owner, nil)
    :persistent_term.put(ks, small)
    :persistent_term.put(kl, big)
    :ok = CCache.put(ks, small)
    :ok = CCache.put(kl, big)
    :ok = CCache.put(kp, Native.compile(3, 4))
    own = Native.own(3, 4)
    # check every path returns the right thing once
    {:ok, s2} = CCache.fetch(ks)
    {:ok, b2} = CCache.fetch(kl)
    true = s2.(1) == small.(1) and b2.(1) == big.(1)
    {:ok, r} = CCache.fetch(kp, as: :ref)
    7 = Native.run(r, 1)

    methods = [
      {"ets_lookup", fn k, n -> l_ets(n, t, k) end},
      {"genserver_call", fn k, n -> l_call(n, owner, k) end},
      {"persistent_term", fn k, n -> l_pt(n, k) end},
      {"fetch_copy", fn k, n -> l_copy(n, k) end},
      {"fetch_ref", fn k, n -> l_ref(n, k) end}
    ]

    copying = ~w(ets_lookup genserver_call fetch_copy)

    per_rep =
      for _ <- 1..reps do
        rows =
          for {name, f} <- methods, {size, k} <- [small: ks, large: kl], procs <- [1, 2] do
            n = if size == :large and name in copying, do: slow_n, else: fast_n
            secs = timed(procs, n, &f.(k, &1))
            {{name, size, procs}, {secs * 1.0e9 / n, procs * n / secs}}
          end

        extra =
          for {name, run} <- [
                {"fetch_use", &l_use(&1, kp)},
                {"fetch_use_in_nif", &l_lend(&1, kp)},
                {"native_call", &l_native(&1, own)}
              ],
              procs <- [1, 2] do
            secs = timed(procs, fast_n, run)
            {{name, :program, procs}, {secs * 1.0e9 / fast_n, procs * fast_n / secs}}
          end

        Map.new(rows ++ extra)
      end

    ns = fn key -> Enum.map(per_rep, &elem(&1[key], 0)) end
    rate = fn key -> Enum.map(per_rep, &elem(&1[key], 1)) end
    ratio = fn a, b -> Enum.zip_with(a, b, &(&1 / &2)) end

    goals = [
      {"fetch + use of a native program by reference / the native call alone",
       ratio.(ns.({"fetch_use", :program, 1}), ns.({"native_call", :program, 1})), :le, 2.0,
       ns.({"fetch_use", :program, 1}), ns.({"native_call", :program, 1}), "ns"},
      {"fetch + use of a native program in one NIF call (ccache_nif.h lend, give_back) / the native call alone",
       ratio.(ns.({"fetch_use_in_nif", :program, 1}), ns.({"native_call", :program, 1})), :le, 2.0,
       ns.({"fetch_use_in_nif", :program, 1}), ns.({"native_call", :program, 1}), "ns"},
      {"ets:lookup of the 431,971-word closure / fetch + use of a native program by reference",
       ratio.(ns.({"ets_lookup", :large, 1}), ns.({"fetch_use", :program, 1})), :ge, 1000.0,
       ns.({"ets_lookup", :large, 1}), ns.({"fetch_use", :program, 1}), "ns"},
      {"CCache.fetch copying a small closure / ets:lookup of it",
       ratio.(ns.({"fetch_copy", :small, 1}), ns.({"ets_lookup", :small, 1})), :le, 1.5,
       ns.({"fetch_copy", :small, 1}), ns.({"ets_lookup", :small, 1}), "ns"},
      {"CCache.fetch by reference of the 431,971-word closure (absolute)",
       ns.({"fetch_ref", :large, 1}), :le, 200.0, ns.({"fetch_ref", :large, 1}), nil, "ns"},
      {"CCache.fetch by reference of the 431,971-word closure / persistent_term.get of it",
       ratio.(ns.({"fetch_ref", :large, 1}), ns.({"persistent_term", :large, 1})), :le, 1.5,
       ns.({"fetch_ref", :large, 1}), ns.({"persistent_term", :large, 1}), "ns"},
      {"CCache.fetch by reference of the 431,971-word closure, 2 processes / 1 (aggregate lookups/s)",
       ratio.(rate.({"fetch_ref", :large, 2}), rate.({"fetch_ref", :large, 1})), :ge, 1.8,
       rate.({"fetch_ref", :large, 2}), rate.({"fetch_ref", :large, 1}), "lookups/s"}
    ]

    goal_rows =
      for {figure, xs, op, target, meas, base, unit} <- goals do
        m = median(xs)
        met = if op == :le, do: m <= target, else: m >= target
        %{
          figure: figure,
          median: m,
          min: Enum.min(xs),
          max: Enum.max(xs),
          target: "#{if op == :le, do: "≤", else: "≥"} #{target}#{if base, do: "×", else: " ns"}",
          status: if(met, do: "met", else: "MISSED"),
          note:
            if(unit == "lookups/s",
              do:
                "persistent_term.get of it, 2 processes / 1 in the same repetitions: " <>
                  "#{fmt2(median(ratio.(rate.({"persistent_term", :large, 2}), rate.({"persistent_term", :large, 1}))))}× (what the machine gave)",
              else: ""
            ),
          measured: "#{fmt(median(meas))} #{unit}",
          baseline: if(base, do: "#{fmt(median(base))} #{unit}", else: "")
        }
      end

    keys =
      for {name, _} <- methods, size <- [:small, :large] do
        {name, size}
      end ++ [{"fetch_use", :program}, {"fetch_use_in_nif", :program}, {"native_call", :program}]

    flat =
      Enum.flat_map(keys, fn {name, size} ->
        s = if size == :program, do: "large", else: Atom.to_string(size)
        name = if size == :program and name == "native_call", do: "native_call", else: name

        suffix = if name == "native_call", do: "", else: "_" <> s

        [
          {"#{name}_ns#{suffix}", median(ns.({name, size, 1}))},
          {"#{name}_per_s#{suffix}_1p", median(rate.({name, size, 1}))},
          {"#{name}_per_s#{suffix}_2p", median(rate.({name, size, 2}))}
        ]
      end)
      |> Map.new()

    flat =
      Map.merge(flat, %{
        "copy_small_ns" => flat["fetch_copy_ns_small"],
        "ets_lookup_small_ns" => flat["ets_lookup_ns_small"],
        "reps" => reps,
        "quick" => quick,
        "large_words" => 431_971,
        "large_external_bytes" => byte_size(:erlang.term_to_binary(big)),
        "schedulers" => :erlang.system_info(:schedulers_online),
        "dirty_cpu_schedulers" => :erlang.system_info(:dirty_cpu_schedulers_online),
        "otp_release" => List.to_string(:erlang.system_info(:otp_release)),
        "goals" =>
          Enum.map(goal_rows, fn g ->
            %{"figure" => g.figure, "median" => g.median, "min" => g.min, "max" => g.max,
              "target" => g.target, "status" => g.status, "note" => g.note}
          end)
      })

    if json do
      IO.puts(to_json(flat))
    else
      IO.puts("### elixir binding: CCache on the BEAM (bindings/elixir/bench/run)\n")
      IO.puts("| figure | measured (median) | baseline (median) | ratio: median [min, max] (reps) | target | status | notes |")
      IO.puts("|---|---|---|---|---|---|---|")

      for g <- goal_rows do
        ratio_s =
          if g.baseline == "",
            do: "",
            else: "#{fmt2(g.median)}× [#{fmt2(g.min)}, #{fmt2(g.max)}] (#{reps})"

        IO.puts("| elixir: #{g.figure} | #{g.measured} | #{g.baseline} | #{ratio_s} | #{g.target} | #{g.status} | +S 2:2#{if g.note != "", do: "; " <> g.note, else: ""} |")
      end

      IO.puts("\nPer lookup, medians of #{reps} repetitions (ns per lookup with 1 client process; aggregate lookups/s with 1 and 2):\n")
      IO.puts("| method | small closure: ns | 1 proc lookups/s | 2 procs lookups/s | 431,971-word closure: ns | 1 proc lookups/s | 2 procs lookups/s |")
      IO.puts("|---|---|---|---|---|---|---|")

      for {name, _} <- methods do
        IO.puts("| #{name} | #{fmt(flat["#{name}_ns_small"])} | #{fmt(flat["#{name}_per_s_small_1p"])} | #{fmt(flat["#{name}_per_s_small_2p"])} | #{fmt(flat["#{name}_ns_large"])} | #{fmt(flat["#{name}_per_s_large_1p"])} | #{fmt(flat["#{name}_per_s_large_2p"])} |")
      end

      IO.puts("| fetch_use (native program by reference + its NIF call) | | | | #{fmt(flat["fetch_use_ns_large"])} | #{fmt(flat["fetch_use_per_s_large_1p"])} | #{fmt(flat["fetch_use_per_s_large_2p"])} |")
      IO.puts("| fetch_use_in_nif (the run NIF looks the program up itself: ccache_nif.h lend) | | | | #{fmt(flat["fetch_use_in_nif_ns_large"])} | #{fmt(flat["fetch_use_in_nif_per_s_large_1p"])} | #{fmt(flat["fetch_use_in_nif_per_s_large_2p"])} |")
      IO.puts("| native_call (the NIF call alone) | | | | #{fmt(flat["native_call_ns"])} | #{fmt(flat["native_call_per_s_1p"])} | #{fmt(flat["native_call_per_s_2p"])} |")
      IO.puts("")
    end
  end

  defp fmt(x) when x >= 1.0e6, do: :erlang.float_to_binary(x / 1.0e6, decimals: 2) <> "M"
  defp fmt(x) when x >= 100, do: Integer.to_string(round(x))
  defp fmt(x), do: :erlang.float_to_binary(x * 1.0, decimals: 1)
  defp fmt2(x) when x >= 100, do: Integer.to_string(round(x))
  defp fmt2(x), do: :erlang.float_to_binary(x * 1.0, decimals: 2)

  # Enough JSON for flat maps of numbers, strings, booleans and lists of such maps.
  def to_json(m) when is_map(m) do
    inner = m |> Enum.sort() |> Enum.map(fn {k, v} -> to_json(to_string(k)) <> ": " <> to_json(v) end)
    "{" <> Enum.join(inner, ", ") <> "}"
  end

  def to_json(l) when is_list(l), do: "[" <> Enum.map_join(l, ", ", &to_json/1) <> "]"
  def to_json(b) when is_boolean(b), do: to_string(b)
  def to_json(x) when is_integer(x), do: Integer.to_string(x)
  def to_json(x) when is_float(x), do: :erlang.float_to_binary(x, [:short])

  def to_json(s) when is_binary(s) do
    "\"" <> (s |> String.replace("\\", "\\\\") |> String.replace("\"", "\\\"")) <> "\""
  end
end

CCacheBench.main(System.argv())
