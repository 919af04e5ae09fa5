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
end
