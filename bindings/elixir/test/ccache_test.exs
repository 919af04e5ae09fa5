# The CCache suite: elixir -pa ebin -pa test_ebin test/ccache_test.exs
# (ctest: elixir_ccache), or `mix test`.  Offline: no hex.  Each test
# starts its caches with start_supervised!, which closes them at its end.
# Here: fetch and put with exact counts, keys (fast and strong), bounds
# and limits, references, inline and dirty copies, native programs, the
# owner (crash, stop, options); get_or_compile's single-flight is in
# test/ccache_flight_test.exs (ctest: elixir_ccache_flight).
ExUnit.start(seed: 0)
Code.require_file("support/big.exs", __DIR__)
Code.require_file("support/helpers.exs", __DIR__)

defmodule CCacheTest do
  use ExUnit.Case, async: false
  alias CCacheTest.Native
  import CCacheTest.Helpers

  test "fetch misses, put then fetch copies the value; counts are exact" do
    c = start(:t_roundtrip)
    assert CCache.fetch(:k, cache: c) == {:error, :cache_miss}
    value = %{layer: 3, shape: {1, 512}, name: "attn", w: [1.5, 2.5]}
    assert CCache.put(:k, value, cache: c) == :ok
    assert CCache.fetch(:k, cache: c) == {:ok, value}
    assert CCache.fetch(:k, cache: c) == {:ok, value}
    s = stats(c)
    assert {s.hits, s.misses, s.inserts, s.items, s.puts_inline, s.copies_inline} == {2, 1, 1, 1, 1, 2}
    assert s.leases_out == 0
    assert CCache.put(:k, :replaced, cache: c) == :ok
    assert CCache.fetch(:k, cache: c) == {:ok, :replaced}
    assert stats(c).replaced == 1
    assert CCache.fetch(:k, cache: :no_such_cache) == {:error, :no_cache}
  end

  test "keys: terms hashed deterministically, a 16-byte binary is the key itself" do
    c = start(:t_keys)
    m1 = %{b: 2, a: 1, c: [1, 2, 3]}
    m2 = Map.new([{:c, [1, 2, 3]}, {:a, 1}, {:b, 2}])
    assert CCache.key(m1) == CCache.key(m2)
    assert byte_size(CCache.key(m1)) == 16
    refute CCache.key({:a, 1}) == CCache.key({:a, 1.0})
    :ok = CCache.put(m1, :v, cache: c)
    assert CCache.fetch(m2, cache: c) == {:ok, :v}
    assert CCache.fetch(CCache.key(m2), cache: c) == {:ok, :v}
    raw = <<1::128>>
    :ok = CCache.put(raw, :raw, cache: c)
    assert CCache.fetch(raw, cache: c) == {:ok, :raw}
    # the raw key is not hashed, so the hashed key of the same binary differs
    assert CCache.fetch(CCache.key(raw), cache: c) == {:error, :cache_miss}
    # a 15-byte binary is a term like any other
    assert CCache.put(<<1::120>>, :short, cache: c) == :ok
    assert CCache.fetch(CCache.key(<<1::120>>), cache: c) == {:ok, :short}
  end

  test "max_items evicts the oldest inserts (FIFO) and changes at runtime" do
    c = start(:t_max_items, max_items: 3)
    for i <- 1..5, do: :ok = CCache.put(i, i, cache: c)
    # a hit does not refresh an entry
    assert CCache.fetch(3, cache: c) == {:ok, 3}
    assert for(i <- 1..5, do: elem(CCache.fetch(i, cache: c), 0)) == [:error, :error, :ok, :ok, :ok]
    assert {stats(c).items, stats(c).evicted_capacity} == {3, 2}
    :ok = CCache.set_limits(c, max_items: 2)
    assert CCache.limits(c).max_items == 2
    assert CCache.fetch(3, cache: c) == {:error, :cache_miss}
    assert {stats(c).items, stats(c).evicted_capacity} == {2, 3}
    :ok = CCache.set_limits(c, max_items: :infinity)
    for i <- 6..10, do: :ok = CCache.put(i, i, cache: c)
    assert {stats(c).items, stats(c).evicted_capacity} == {7, 3}
    assert_raise ArgumentError, fn -> CCache.set_limits(c, max_items: 0) end
  end

  test "ttl: milliseconds from insert time on the (manual) clock, changeable at runtime" do
    c = start(:t_ttl, ttl: 100, manual_clock: true)
    :ok = CCache.put(:a, 1, cache: c)
    CCache.advance_clock(c, 50)
    :ok = CCache.put(:b, 2, cache: c)
    CCache.advance_clock(c, 49)
    assert CCache.fetch(:a, cache: c) == {:ok, 1}
    CCache.advance_clock(c, 1)
    assert CCache.fetch(:a, cache: c) == {:error, :cache_miss}
    assert CCache.fetch(:b, cache: c) == {:ok, 2}
    assert stats(c).evicted_ttl == 1
    :ok = CCache.set_limits(c, ttl: :infinity)
    CCache.advance_clock(c, 1000)
    assert CCache.fetch(:b, cache: c) == {:ok, 2}
    # b was inserted at 50; now is 1100
    :ok = CCache.set_limits(c, ttl: 1050)
    assert CCache.fetch(:b, cache: c) == {:error, :cache_miss}
    assert {stats(c).evicted_ttl, stats(c).items} == {2, 0}
  end

  test "a reference keeps its value after the entry leaves; the value dies with the last holder" do
    c = start(:t_ref)
    value = {:closure, Enum.to_list(1..100)}
    :ok = CCache.put(:k, value, cache: c)

    pid =
      spawn_call(fn ->
        {:ok, ref} = CCache.fetch(:k, as: :ref, cache: c)
        :ok = CCache.remove(:k, cache: c)
        {CCache.fetch(:k, cache: c), CCache.value(ref), CCache.ref_info(ref), stats(c)}
      end)

    {miss, copy, info, s} = result_of(pid)
    assert miss == {:error, :cache_miss}
    assert copy == {:ok, value}
    assert info == {:term, byte_size(:erlang.term_to_binary(value))}
    # the entry let go of the value; the reference still holds it
    assert {s.items, s.removed, s.closures_destroyed, s.values} == {0, 1, 1, 1}
    assert down(pid) == :normal
    # the process's heap, and with it the reference, is gone (the VM may run
    # a resource destructor a little later, on another thread)
    wait_until(fn -> stats(c).values == 0 end)
    assert {stats(c).values, stats(c).leases_out, stats(c).closures_destroyed} == {0, 0, 1}
  end

  test "small values stay on the calling scheduler, a 431,971-word closure goes dirty" do
    c = start(:t_dirty)
    big = CCacheTest.Big.closure(431_971)
    :ok = CCache.put(:small, {1, 2, 3}, cache: c)
    :ok = CCache.put(:big, big, cache: c)
    assert {stats(c).puts_inline, stats(c).puts_dirty} == {1, 1}
    {:ok, copy} = CCache.fetch(:big, cache: c)
    assert :erts_debug.flat_size(copy) == 431_971
    assert copy.(7) == big.(7)
    {:ok, {1, 2, 3}} = CCache.fetch(:small, cache: c)
    {:ok, ref} = CCache.fetch(:big, as: :ref, cache: c)
    assert CCache.ref_info(ref) == {:term, byte_size(:erlang.term_to_binary(big))}
    {:ok, copy2} = CCache.value(ref)
    assert copy2.(1) == big.(1)
    assert {stats(c).copies_inline, stats(c).copies_dirty} == {1, 2}
    # a term without funs goes dirty too when the bounded walk sees more
    # than inline_max bytes of binaries
    blob = {:weights, :binary.copy("w", 10_000)}
    :ok = CCache.put(:blob, blob, cache: c)
    assert {:ok, ^blob} = CCache.fetch(:blob, cache: c)
    assert {stats(c).puts_dirty, stats(c).copies_dirty} == {2, 3}
  end

  test "keys of large terms (hashed on a dirty scheduler past 256 KiB) are deterministic" do
    c = start(:t_big_key)
    big_key = {:graph, :binary.copy("n", 300_000)}
    k = CCache.key(big_key)
    assert byte_size(k) == 16
    assert CCache.key({:graph, :binary.copy("n", 300_000)}) == k
    refute CCache.key({:graph, :binary.copy("n", 299_999)}) == k
    :ok = CCache.put(big_key, :v, cache: c)
    assert CCache.fetch(k, cache: c) == {:ok, :v}
  end

  test "a native program from another NIF: shared by two keys, run by reference, destroyed once" do
    c = start(:t_native)
    other = start(:t_native_other)
    before = Native.destroyed()

    pid =
      spawn_call(fn ->
        prog = Native.compile(3, 4)
        :ok = CCache.put(:layer1, prog, cache: c)
        :ok = CCache.put(:layer2, prog, cache: c)
        {:ok, r1} = CCache.fetch(:layer1, as: :ref, cache: c)
        # a native entry's value is its reference in copy mode too
        {:ok, r2} = CCache.fetch(:layer2, cache: c)
        :ok = CCache.remove(:layer1, cache: c)
        :ok = CCache.remove(:layer2, cache: c)
        alive = {stats(c).programs, Native.destroyed() - before}

        {Native.run(r1, 10), Native.run(r2, -1), Native.run(prog, 0), CCache.ref_info(r1),
         CCache.put(:elsewhere, prog, cache: other), alive}
      end)

    assert result_of(pid) == {34, 1, 4, :native, {:error, :other_cache}, {1, 0}}
    assert down(pid) == :normal
    wait_until(fn -> Native.destroyed() - before >= 1 end)
    assert Native.destroyed() - before == 1
    assert {stats(c).programs, stats(c).natives_destroyed} == {0, 1}
    # a reference to a term value is not a native program
    :ok = CCache.put(:term, 5, cache: c)
    {:ok, tref} = CCache.fetch(:term, as: :ref, cache: c)
    assert_raise ArgumentError, fn -> Native.run(tref, 1) end
  end

  test "another NIF looks a native program up by key itself (lend / give_back)" do
    c = start(:t_lend)
    k = CCache.key(:layer)
    assert Native.run_key(c, k, 1) == :cache_miss
    :ok = CCache.put(k, Native.compile(10, 1), cache: c)
    assert Native.run_key(c, k, 4) == 41
    :ok = CCache.put(CCache.key(:term), {:not, :native}, cache: c)
    assert_raise ArgumentError, fn -> Native.run_key(c, CCache.key(:term), 1) end
    assert_raise ArgumentError, fn -> Native.run_key(:no_such_cache, k, 1) end
    s = stats(c)
    assert {s.hits, s.misses, s.leases_out} == {2, 1, 0}
  end

  test "a program term that is never put is destroyed when collected" do
    before = Native.destroyed()
    pid = spawn_call(fn -> Native.run(Native.compile(2, 0), 21) end)
    assert result_of(pid) == 42
    assert down(pid) == :normal
    wait_until(fn -> Native.destroyed() - before >= 1 end)
    assert Native.destroyed() - before == 1
  end

  test "the cache survives its owner: a crash and restart re-attach without emptying it" do
    {:ok, sup} =
      Supervisor.start_link([{CCache, name: :t_survive, max_items: 100}], strategy: :one_for_one)

    assert CCache.attach_status(:t_survive) == :created
    for i <- 1..3, do: :ok = CCache.put(i, {:v, i}, cache: :t_survive)
    old = Process.whereis(:t_survive)
    Process.exit(old, :kill)
    wait_until(fn -> Process.whereis(:t_survive) not in [nil, old] end)
    assert CCache.attach_status(:t_survive) == :attached
    assert for(i <- 1..3, do: CCache.fetch(i, cache: :t_survive)) == [ok: {:v, 1}, ok: {:v, 2}, ok: {:v, 3}]
    assert stats(:t_survive).items == 3
    Supervisor.stop(sup)
  end

  # ---- native programs shared by processes, references, flights, options

  test "a reference put under another key is that value, never a silent copy" do
    c = start(:t_ref_put)
    :ok = CCache.put(:a, %{w: [1, 2, 3]}, cache: c)
    {:ok, r} = CCache.fetch(:a, cache: c, as: :ref)
    assert CCache.put(:b, r, cache: c) == :ok
    # the term itself, not a reference stored as a term
    assert CCache.fetch(:b, cache: c) == {:ok, %{w: [1, 2, 3]}}
    {:ok, rb} = CCache.fetch(:b, cache: c, as: :ref)
    assert CCache.ref_info(rb) == CCache.ref_info(r)
    # a native program of one cache cannot be put in another
    :ok = CCache.put(:n, Native.compile(1, 1), cache: c)
    {:ok, rn} = CCache.fetch(:n, cache: c, as: :ref)
    other = start(:t_ref_put_other)
    assert CCache.put(:n, rn, cache: other) == {:error, :other_cache}
    assert CCache.fetch(:n, cache: other) == {:error, :cache_miss}
  end

  # Issue 38 item 3: the smaller surprises.
  test "set_limits accepts what limits returns (a map) and a keyword list" do
    c = start(:t_limits_map, max_items: 10)
    l = CCache.limits(c)
    assert CCache.set_limits(c, l) == :ok
    assert CCache.set_limits(c, %{l | max_items: 3, inline_max: 100}) == :ok
    assert CCache.set_limits(c, ttl: 500) == :ok
    assert CCache.limits(c) == %{max_items: 3, ttl: 500, inline_max: 100}
    assert_raise ArgumentError, fn -> CCache.set_limits(c, bogus: 1) end
  end

  test "the docs of each call say what it returns; value/1 shows {:ok, term}" do
    {:docs_v1, _, _, _, _, _, docs} = Code.fetch_docs(CCache)
    doc = fn f, a -> for({{:function, ^f, ^a}, _, _, %{"en" => d}, _} <- docs, do: d) |> Enum.join() end
    assert doc.(:value, 1) =~ "{:ok, term}"
    assert doc.(:ref_info, 1) =~ ":not_a_reference"

    for {f, a} <- [fetch: 2, put: 3, get_or_compile: 3, value: 1, stop: 1, set_limits: 2] do
      assert doc.(f, a) =~ "Returns", "#{f}/#{a}"
    end
  end

  test "a stopped cache frees its name; 200 caches, one per test, reach no limit" do
    # other tests' program terms die first (the destroy count is global)
    Enum.each(Process.list(), &:erlang.garbage_collect/1)
    Process.sleep(50)
    before = Native.destroyed()
    {:ok, _} = CCache.start_link(name: :t_stop)
    :ok = CCache.put(:a, %{w: 1}, cache: :t_stop)
    :ok = CCache.put(:n, Native.compile(2, 0), cache: :t_stop)
    {:ok, r} = CCache.fetch(:a, cache: :t_stop, as: :ref)
    {:ok, rn} = CCache.fetch(:n, cache: :t_stop)
    assert CCache.stop(:t_stop) == :ok
    assert CCache.fetch(:a, cache: :t_stop) == {:error, :no_cache}
    # references outlive the cache
    assert {CCache.value(r), Native.run(rn, 4)} == {{:ok, %{w: 1}}, 8}
    {:ok, _} = CCache.start_link(name: :t_stop)
    assert {CCache.attach_status(:t_stop), CCache.fetch(:a, cache: :t_stop)} == {:created, {:error, :cache_miss}}
    :ok = CCache.stop(:t_stop)

    opened =
      for i <- 1..200 do
        name = :"t_per_test_#{i}"
        {:ok, _} = start_supervised({CCache, name: name, max_items: 4})
        :ok = CCache.put(i, i, cache: name)
        :ok = stop_supervised({CCache, name})
        CCache.fetch(i, cache: name)
      end

    assert Enum.uniq(opened) == [{:error, :no_cache}]
    rn = nil
    _ = rn
    :erlang.garbage_collect()
    wait_until(fn -> Native.destroyed() - before >= 1 end)
    assert Native.destroyed() - before == 1
  end

  test "a misspelled or invalid option fails the start, naming it" do
    Application.put_env(:ccache_test_app, :t_typo_cache, max_itmes: 10)
    {:error, {{%ArgumentError{message: m}, _}, _}} =
      start_supervised({CCache, name: :t_typo_cache, otp_app: :ccache_test_app})
    assert m =~ "unknown option(s) [:max_itmes]"
    {:error, {{%ArgumentError{message: m}, _}, _}} = start_supervised({CCache, name: :t_bad_ttl, ttl: "30m"})
    assert m =~ ~s(option :ttl: "30m" is not a positive integer or :infinity)
    {:error, {{%ArgumentError{message: m}, _}, _}} = start_supervised({CCache, name: :t_bad_max, max_items: -5})
    assert m =~ "option :max_items: -5"
    {:error, {{%ArgumentError{message: m}, _}, _}} = start_supervised({CCache, name: :t_bad_keys, keys: :weak})
    assert m =~ "option :keys: :weak is not valid"
  end

  test "options from the application environment (config :my_app, MyCache, ...)" do
    Application.put_env(:ccache_test_app, :t_env_cache, max_items: 7, ttl: 1000)
    start_supervised!({CCache, name: :t_env_cache, otp_app: :ccache_test_app, ttl: 2000})
    assert CCache.limits(:t_env_cache) == %{max_items: 7, ttl: 2000, inline_max: 8192}
    Application.put_env(:ccache, :t_env_default, max_items: 5)
    start_supervised!({CCache, name: :t_env_default})
    assert CCache.limits(:t_env_default).max_items == 5
  end

  # Issue 38 item 6: keys from terms that others choose.
  test "keys: :strong compares all 256 bits (BLAKE2b-256 keys); every call works on it" do
    c = start(:t_strong, keys: :strong)
    k = CCache.key({:tenant, 1, %{op: :matmul}}, cache: c)
    assert {byte_size(k), byte_size(CCache.key(:x)), CCache.key(:x, keys: :strong) == CCache.key(:x, cache: c)} == {32, 16, true}
    # two keys equal in their first 128 bits (a fast-key collision) are two entries
    <<lo::binary-16, _::binary-16>> = k
    k2 = lo <> :binary.copy(<<0>>, 16)
    :ok = CCache.put(k, :mine, cache: c)
    assert {CCache.fetch(k, cache: c), CCache.fetch(k2, cache: c)} == {{:ok, :mine}, {:error, :cache_miss}}
    :ok = CCache.put(k2, :other, cache: c)
    assert {CCache.fetch(k, cache: c), CCache.fetch(k2, cache: c)} == {{:ok, :mine}, {:ok, :other}}
    # a term key is hashed strong; a 16-byte binary is hashed as a term, never taken as is
    :ok = CCache.put({:tenant, 1, %{op: :matmul}}, :again, cache: c)
    assert CCache.fetch(k, cache: c) == {:ok, :again}
    k16 = CCache.key(:fast_key)
    :ok = CCache.put(k16, :v16, cache: c)
    assert CCache.fetch(CCache.key(k16, cache: c), cache: c) == {:ok, :v16}
    # native programs, single-flight, lend and remove in strong mode
    {:ok, p} = CCache.get_or_compile(:prog, fn -> {:ok, Native.compile(3, 1)} end, cache: c, as: :ref)
    :ok = CCache.put(:site, p, cache: c)
    assert {Native.run(p, 2), Native.run_key(c, CCache.key(:site, cache: c), 2)} == {7, 7}
    assert CCache.remove(k2, cache: c) == :ok
    assert CCache.fetch(k2, cache: c) == {:error, :cache_miss}
    assert stats(c).programs == 1
    # one name, one key mode
    assert {:error, :other_key_mode} = CCache.Nif.open(c, :infinity, :infinity, 8192, false, :fast)
  end
end
