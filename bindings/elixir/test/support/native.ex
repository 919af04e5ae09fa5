defmodule CCacheTest.Native do
  @moduledoc false
  # A NIF library that provides native programs through ccache_nif.h
  # (test/c_src/test_native.c): a program is x -> a * x + b.
  @on_load :load_nif
  @built_path System.get_env("CLOSURE_CACHE_ELIXIR_TEST_NIF", "ccache_test_native")

  def load_nif do
    path = CCache.Nif.priv_path("ccache_test_native") || @built_path
    :erlang.load_nif(String.to_charlist(path), CCache.Nif.so_path())
  end

  def compile(_a, _b), do: :erlang.nif_error(:not_loaded)
  def run(_ref, _x), do: :erlang.nif_error(:not_loaded)
  def run_key(_cache, _key, _x), do: :erlang.nif_error(:not_loaded)
  def own(_a, _b), do: :erlang.nif_error(:not_loaded)
  def run_own(_res, _x), do: :erlang.nif_error(:not_loaded)
  def destroyed, do: :erlang.nif_error(:not_loaded)
end
