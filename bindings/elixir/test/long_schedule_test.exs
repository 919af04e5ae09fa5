# No CCache NIF call runs longer than 1 ms on a normal scheduler, for the
# 431,971-word closure of EMLX's SmolLM2 report (ctest: elixir_long_schedule).
#
# :erlang.system_monitor(pid, [{:long_schedule, 1}]) reports a process that
# ran uninterrupted on a normal scheduler for more than 1 ms.  The VM sends
# no such message about the monitoring process itself, so a collector
# process is the monitor.  A process's uninterrupted run is measured from
# the moment it is scheduled in, so each call is isolated between two
# Process.sleep(1): a message about this process in that window is about
# that call.  Work on a dirty scheduler is not counted (that is its point).
ExUnit.start(seed: 0)
Code.require_file("support/big.exs", __DIR__)

defmodule CCacheLongScheduleTest do
  use ExUnit.Case, async: false

  @words 431_971

  setup_all do
    big = CCacheTest.Big.closure(@words)
    {:ok, big: big}
  end

  defp collector do
    receive do
      {:get, from} ->
        send(from, {:msgs, flush([])})
        collector()
    end
  end

  defp flush(acc) do
    receive do
      {:monitor, _, :long_schedule, _} = m -> flush([m | acc])
    after
      0 -> Enum.reverse(acc)
    end
  end

  # Run each {label, fun} isolated, `reps` times; return [{label, message}]
  # for every long_schedule message about this process.
  defp monitored(calls, reps) do
    col = spawn_link(&collector/0)
    :erlang.system_monitor(col, [{:long_schedule, 1}])
    me = self()

    found =
      for _ <- 1..reps, {label, f} <- calls, reduce: [] do
        acc ->
          Process.sleep(1)
          f.()
          Process.sleep(1)
          send(col, {:get, me})

          receive do
            {:msgs, msgs} -> acc ++ for({:monitor, ^me, _, info} <- msgs, do: {label, info})
          end
      end

    :erlang.system_monitor(:undefined)
    found
  end

  defp calls(c, big) do
    prog = CCacheTest.Native.compile(1, 2)

    [
      put: fn -> :ok = CCache.put(:big, big, cache: c) end,
      fetch_copy: fn -> {:ok, _} = CCache.fetch(:big, cache: c) end,
      fetch_ref: fn -> {:ok, _} = CCache.fetch(:big, cache: c, as: :ref) end,
      value_of_ref: fn ->
        {:ok, r} = CCache.fetch(:big, cache: c, as: :ref)
        {:ok, _} = CCache.value(r)
      end,
      get_or_compile_hit: fn -> {:ok, _} = CCache.get_or_compile(:big, fn -> :unused end, cache: c) end,
      put_native: fn -> :ok = CCache.put(:prog, prog, cache: c) end,
      fetch_native: fn -> {:ok, _} = CCache.fetch(:prog, cache: c) end
    ]
  end

  test "put and fetch of the 431,971-word closure: no long_schedule message", %{big: big} do
    start_supervised!({CCache, name: :ls_default})
    assert :erts_debug.flat_size(big) == @words
    assert monitored(calls(:ls_default, big), 3) == []
    s = CCache.stats(:ls_default)
    # every put and every copy of it went to a dirty scheduler
    assert {s.puts_dirty, s.copies_dirty, s.copies_inline} == {3, 9, 0}
  end

  test "control: the same calls all inline (inline_max: :infinity) are reported", %{big: big} do
    start_supervised!({CCache, name: :ls_inline, inline_max: :infinity})
    found = monitored(calls(:ls_inline, big), 3)
    labels = found |> Enum.map(&elem(&1, 0)) |> Enum.uniq()
    IO.puts("\ncontrol, reported: #{inspect(found)}")
    # an inline 3.5 MB copy into the caller's heap takes several ms, so the
    # monitor must report it; an inline put and a copy out of a reference
    # are reported on most runs but not asserted (each came in under 1 ms
    # in some CI runs)
    assert :fetch_copy in labels
  end

  # ---- 100,000 processes missing one key

  # Spawn n processes running f, run middle.() once they are all waiting,
  # then collect every answer (bounded) and the long_schedule reports over
  # threshold ms meanwhile: {answers by frequency, [{pid, info}], middle's}.
  defp crowd(n, threshold, f, middle) do
    col = spawn_link(&collector/0)
    :erlang.system_monitor(col, [{:long_schedule, threshold}])
    me = self()
    for _ <- 1..n, do: spawn(fn -> send(me, {:answer, f.()}) end)
    mid = middle.()

    answers =
      for _ <- 1..n do
        receive do
          {:answer, a} -> a
        after
          120_000 -> flunk("a process did not answer in 120 s")
        end
      end

    :erlang.system_monitor(:undefined)
    send(col, {:get, me})
    msgs = receive do: ({:msgs, msgs} -> msgs)
    {Enum.frequencies(answers), for({:monitor, pid, :long_schedule, info} <- msgs, do: {pid, info}), mid}
  end

  defp worst(reports), do: reports |> Enum.map(fn {_, i} -> i[:timeout] end) |> Enum.max(fn -> 0 end)

  defp wait_for(f, tries \\ 120_000) do
    cond do
      f.() -> :ok
      tries == 0 -> flunk("not reached in 120 s")
      true -> Process.sleep(1) && wait_for(f, tries - 1)
    end
  end

  @crowd 100_000
  @tag timeout: 600_000
  test "100,000 processes missing one key: joins O(1), the finish in slices (vs 100,000 plain waiters)" do
    start_supervised!({CCache, name: :ls_crowd})
    me = self()

    # the control: as many processes that monitor one process and wait for it
    sleeper = spawn(fn -> receive do: (:go -> :ok) end)

    plain_wait = fn ->
      m = Process.monitor(sleeper)
      receive do: ({:DOWN, ^m, _, _, _} -> :ok)
    end

    {plain_answers, plain_reports, _} =
      crowd(@crowd, 5, plain_wait, fn ->
        wait_for(fn -> length(elem(Process.info(sleeper, :monitored_by), 1)) >= @crowd end)
        send(sleeper, :go)
      end)

    compile = fn ->
      send(me, {:compiler, self()})
      receive do: (:go -> {:ok, :compiled})
    end

    # once 99,999 processes wait: 20 more joins, each timed (one NIF call)
    middle = fn ->
      compiler = receive do: ({:compiler, pid} -> pid)
      wait_for(fn -> CCache.flight_waiters(:one, :ls_crowd) >= @crowd - 1 end)
      k = CCache.key(:one)

      joins =
        for _ <- 1..20 do
          {us, w} = :timer.tc(fn -> CCache.Nif.flight_join(:ls_crowd, k, make_ref(), nil) end)
          {:wait, ^compiler} = {elem(w, 0), elem(w, 1)}
          us
        end

      tracer = spawn_link(fn -> trace_collector([]) end)
      :erlang.trace(compiler, true, [:running, :timestamp, {:tracer, tracer}])
      send(compiler, :go)
      {compiler, Enum.sort(joins), tracer}
    end

    {answers, reports, {compiler, joins, tracer}} =
      crowd(@crowd, 5, fn -> CCache.get_or_compile(:one, compile, cache: :ls_crowd) end, middle)

    mine = for {^compiler, info} <- reports, do: {compiler, info}
    join_median = Enum.at(joins, 10)
    send(tracer, {:get, self()})
    runs = receive do: ({:runs, r} -> r)
    run_median = Enum.at(runs, div(length(runs), 2))

    IO.puts("\n#{@crowd} plain waiters: #{length(plain_reports)} long_schedule reports over 5 ms, worst #{worst(plain_reports)} ms")
    IO.puts("#{@crowd} get_or_compile of one key: #{length(reports)} reports over 5 ms, worst #{worst(reports)} ms; " <>
              "on the compiler: #{length(mine)}, worst #{worst(mine)} ms; " <>
              "a join with #{@crowd - 1} waiters: median #{join_median} us, max #{List.last(joins)} us; " <>
              "the compiler from :go to its exit: #{length(runs)} runs, median #{run_median} us, longest #{List.last(runs)} us")

    assert {plain_answers, answers} == {%{ok: @crowd}, %{{:ok, :compiled} => @crowd}}
    s = CCache.stats(:ls_crowd)
    assert {s.inserts, s.items} == {1, 1}
    # a join is O(1): microseconds, where a scan of 100,000 waiters is most of a millisecond
    assert join_median < 100
    # the finish sends 100,000 messages in slices of ~0.2 ms, the compiler
    # yielding between them: its typical run stays under 1 ms.  (Single
    # runs and reports can still be long when the OS preempts a scheduler
    # thread, in either crowd, on a loaded machine: printed, not asserted.)
    assert length(runs) >= 100 and run_median < 1000
    # and the crowd is no worse off than as many plain waiting processes
    # (before: 7,856 reports, worst 1,537 ms, against 234)
    assert length(reports) < 5 * max(length(plain_reports), 100)
  end

  # The compiler's runs (in to out, microseconds, sorted) from trace events.
  defp trace_collector(acc) do
    receive do
      {:trace_ts, _, ev, _, ts} ->
        trace_collector([{ev, ts} | acc])

      {:get, from} ->
        us = fn {a, b, c} -> (a * 1_000_000 + b) * 1_000_000 + c end

        runs =
          acc
          |> Enum.reverse()
          |> Enum.chunk_every(2)
          |> Enum.flat_map(fn
            [{:in, a}, {:out, b}] -> [us.(b) - us.(a)]
            _ -> []
          end)

        send(from, {:runs, Enum.sort(runs)})
    end
  end
end
