defmodule CCache.Flight do
  @moduledoc """
  The single-flight protocol behind `CCache.get_or_compile/3`: join the
  NIF's flight record for a key that missed, then either compile (the
  owner of the flight) or wait in `receive` with a monitor on the compiler
  (taking the flight over if it dies).  Use `CCache.get_or_compile/3`;
  nothing here is meant for other code.
  """

  # get_or_compile/3 stays in CCache (its docs, the key and the first
  # fetch); this is what runs after that fetch missed.
  alias CCache.Nif

  @doc false
  # Join the flight for `k` (already a binary key of `cache`): `:owner`
  # compiles, a waiter waits; `dead` is the `{owner, id}` of a compiler
  # seen to die, which lets this process take its flight over.
  def join(cache, k, fun, as, wref, dead) do
    case Nif.flight_join(cache, k, wref, dead) do
      :owner ->
        flush(wref)
        compile(cache, k, fun, as)

      {:wait, owner, id} ->
        await(cache, k, fun, as, wref, owner, id)

      :deadlock ->
        {:error, :deadlock}

      {:error, _} = e ->
        e
    end
  end

  defp await(cache, k, fun, as, wref, owner, id) do
    mref = Process.monitor(owner)

    receive do
      {:ccache_flight, ^wref, result} ->
        Process.demonitor(mref, [:flush])

        case result do
          {:ok, ref} when as == :ref -> {:ok, ref}
          {:ok, ref} -> Nif.ref_value(ref)
          :retry -> CCache.get_or_compile(k, fun, cache: cache, as: as)
          {:error, _} = e -> e
        end

      {:DOWN, ^mref, :process, ^owner, _} ->
        join(cache, k, fun, as, wref, {owner, id})
    end
  end

  defp flush(wref) do
    receive do
      {:ccache_flight, ^wref, _} -> flush(wref)
    after
      0 -> :ok
    end
  end

  defp compile(cache, k, fun, as) do
    # Someone may have put the key between our miss and our claim.
    case Nif.fetch(cache, k, as) do
      {:error, :cache_miss} ->
        result =
          try do
            fun.()
          catch
            kind, reason ->
              Nif.flight_finish(cache, k, {:error, {:compile_crashed, kind, reason}})
              :erlang.raise(kind, reason, __STACKTRACE__)
          end

        store(cache, k, as, result)

      other ->
        Nif.flight_finish(cache, k, if(match?({:ok, _}, other), do: :ok, else: other))
        other
    end
  end

  defp store(cache, k, as, {:ok, value}) do
    # The put answers a reference to the value it stored: the entry may be
    # evicted at once, the reference (and the waiters' copies) still hold it.
    case Nif.put(cache, k, value, :ref) do
      {:ok, _ref} = ok ->
        Nif.flight_finish(cache, k, ok)
        if as == :ref, do: ok, else: {:ok, value}

      {:error, _} = e ->
        Nif.flight_finish(cache, k, e)
        e
    end
  end

  defp store(cache, k, _as, {:error, _} = e) do
    Nif.flight_finish(cache, k, e)
    e
  end

  defp store(cache, k, _as, other) do
    e = {:error, {:bad_compile_result, other}}
    Nif.flight_finish(cache, k, e)
    raise ArgumentError, "get_or_compile: the function must return {:ok, value} or {:error, reason}, got: #{inspect(other)}"
  end
end
