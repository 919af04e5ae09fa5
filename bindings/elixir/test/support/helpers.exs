# Helpers shared by the CCache suites (test/ccache_test.exs and
# test/ccache_flight_test.exs): each suite runs alone under `elixir` too,
# so this is a script they require, not a module under mix's compile path.
defmodule CCacheTest.Helpers do
  @moduledoc false
  import ExUnit.Assertions, only: [flunk: 1]
  import ExUnit.Callbacks, only: [start_supervised!: 1]

  def start(name, opts \\ []) do
    start_supervised!({CCache, [name: name] ++ opts})
    name
  end

  # Poll a condition that other processes make true; bounded (5 s).
  def wait_until(f, tries \\ 5000) do
    cond do
      f.() -> :ok
      tries == 0 -> flunk("condition not reached in 5 s")
      true -> Process.sleep(1) && wait_until(f, tries - 1)
    end
  end

  # Run f in a new process; its result arrives as {:result, pid, value}.
  def spawn_call(f) do
    parent = self()
    {pid, _mref} = spawn_monitor(fn -> send(parent, {:result, self(), f.()}) end)
    pid
  end

  def result_of(pid) do
    receive do
      {:result, ^pid, v} -> v
    after
      5000 -> flunk("no result from #{inspect(pid)}")
    end
  end

  def down(pid) do
    receive do
      {:DOWN, _, :process, ^pid, reason} -> reason
    after
      5000 -> flunk("#{inspect(pid)} did not exit")
    end
  end

  def stats(c), do: CCache.stats(c)
end
