# elixir -pa build/test/bindings/elixir/ebin bindings/elixir/example.exs
Supervisor.start_link([{CCache, max_items: 1024, ttl: :timer.minutes(30)}], strategy: :one_for_one)
key = {:decoder_layer, 3, {1, 512}, :f32}
compile = fn -> {:ok, fn x -> x * 2 end} end
{:ok, fun} = CCache.get_or_compile(key, compile)
{:ok, same} = CCache.get_or_compile(key, fn -> raise "not called: a hit" end)
{:ok, ref} = CCache.fetch(key, as: :ref)
IO.inspect({fun.(21), same.(21), CCache.ref_info(ref)})
IO.inspect(Map.take(CCache.stats(), [:hits, :misses, :inserts, :items]))
