#!/bin/sh
# ctest elixir_mix_dep: a throwaway mix application that depends on this
# binding by path ({:ccache, path: ...}), offline (no hex), compiled and run
# with no environment variable: the NIF must come from the dependency's
# compiler step into priv/.  $1 = bindings/elixir, $2 = a scratch directory.
set -eu
src=$1
work=$2
rm -rf "$work"
mkdir -p "$work/lib"
cat >"$work/mix.exs" <<MIX
defmodule MixDep.MixProject do
  use Mix.Project
  def project, do: [app: :mix_dep, version: "0.1.0", elixir: "~> 1.14", deps: [{:ccache, path: "$src"}]]
  def application, do: [extra_applications: [:logger]]
end
MIX
cd "$work"
unset CLOSURE_CACHE_ELIXIR_NIF || true
mix compile
mix run -e '
{:ok, _} = Supervisor.start_link([{CCache, max_items: 16}], strategy: :one_for_one)
{:ok, f} = CCache.get_or_compile({:layer, 3}, fn -> {:ok, fn x -> x * 2 end} end)
priv = to_string(:code.priv_dir(:ccache))
true = String.starts_with?(CCache.Nif.so_path(), priv)
IO.inspect({f.(21), Map.take(CCache.stats(), [:inserts, :items])}, label: "mix_dep")
' | tee out.txt
grep -q 'mix_dep: {42, %{inserts: 1, items: 1}}' out.txt
