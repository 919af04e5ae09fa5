# A hot code upgrade of CCache.Nif keeps every cache (ctest: elixir_upgrade).
# Loading the module's code again makes the running code old and the new
# code current; the new code's on_load loads the NIF library again, which
# runs its upgrade callback (the registry of caches is handed on); purging
# the old code runs the old instance's unload callback, which keeps it.
ExUnit.start(seed: 0)

defmodule CCacheUpgradeTest do
  use ExUnit.Case, async: false
  alias CCacheTest.Native

  defp reload do
    {CCache.Nif, bin, file} = :code.get_object_code(CCache.Nif)
    {:module, CCache.Nif} = :code.load_binary(CCache.Nif, file, bin)
    :code.purge(CCache.Nif)
  end

  test "entries, references and native programs survive two upgrades and purges" do
    start_supervised!({CCache, name: :up, max_items: 10})
    :ok = CCache.put(:a, {:value, 1}, cache: :up)
    :ok = CCache.put(:prog, Native.compile(2, 3), cache: :up)
    {:ok, ref} = CCache.fetch(:a, as: :ref, cache: :up)
    {:ok, pref} = CCache.fetch(:prog, as: :ref, cache: :up)
    {loads, upgrades} = CCache.Nif.load_info()
    reload()
    assert CCache.Nif.load_info() == {loads, upgrades + 1}
    assert CCache.fetch(:a, cache: :up) == {:ok, {:value, 1}}
    assert CCache.value(ref) == {:ok, {:value, 1}}
    assert Native.run(pref, 5) == 13
    reload()
    assert CCache.Nif.load_info() == {loads, upgrades + 2}
    assert CCache.fetch(:prog, cache: :up) |> elem(1) |> Native.run(1) == 5
    assert CCache.get_or_compile(:b, fn -> {:ok, :new} end, cache: :up) == {:ok, :new}
    assert CCache.limits(:up).max_items == 10
    assert CCache.stats(:up).items == 3
  end
end
