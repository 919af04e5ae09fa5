defmodule CCacheTest.Big do
  @moduledoc false
  # A closure of exactly n words (:erts_debug.flat_size/1, no sharing): the
  # size of the SmolLM2 serving closure in EMLX's report (431,971 words,
  # ~3.5 MB).  Its environment is a list of {integer, float} tuples
  # (7 words each: cons 2, tuple 3, boxed float 2) padded with small
  # integers (2 words each).
  def closure(n) do
    base = :erts_debug.flat_size(make([]))
    rest = n - base
    k = div(rest, 7)
    pad = rest - 7 * k
    {k, pad} = if rem(pad, 2) == 1, do: {k - 1, pad + 7}, else: {k, pad}
    data = Enum.map(1..k, fn i -> {i, i * 0.5} end) ++ Enum.to_list(1..div(pad, 2)//1)
    f = make(data)
    ^n = :erts_debug.flat_size(f)
    f
  end

  # A small closure (a few words), the other size the benchmark uses.
  def small_closure, do: make([1, 2, 3])

  defp make(data), do: fn x -> {x, data} end
end
