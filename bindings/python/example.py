"""The README's first use: a cache of compiled closures, one compile per key."""
import ccache


def compile_kernel(op, shape):
    print(f"compiling {op}{shape}")
    return lambda x: f"{op}{shape}({x})"


with ccache.Cache(max_items=4096) as cache:
    key = ccache.key("matmul", (128, 64), "float32")
    for _ in range(3):
        kernel = cache.get_or_compile(key, lambda: compile_kernel("matmul", (128, 64)))
    print(kernel("x"))
    s = cache.stats()
    print(f"hits={s.hits} misses={s.misses} compiles={s.compiles} items={s.items}")
