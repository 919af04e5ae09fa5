defmodule CCache do
  @moduledoc """
  A compile-closure cache for the BEAM, on ccache (the C library).

  Values live in C, in no process: an Erlang term is copied once, at put,
  into a process-independent environment; a native program made by another
  NIF (see `ccache_nif.h`) is held as a ccache program.  The calls are those
  of EMLX's `CompileCache`: `fetch/2` returns `{:ok, value}` or
  `{:error, :cache_miss}`, `put/3`, bounds `max_items` and `ttl` (FIFO by
  insert, TTL in milliseconds from insert time, both `:infinity` by default,
  changeable at runtime with `set_limits/2`), `stats/1`, and a default
  instance, `CCache`, that fits a supervision tree:

      children = [{CCache, max_items: 1024, ttl: :timer.minutes(30)}]

  ## Keys

  A cache takes fast keys (default) or strong keys (`keys: :strong`).
  Fast: a 16-byte binary is the 128-bit key itself; any other term is
  hashed with ccache's fingerprint builder (XXH3-128) over a domain tag and
  `:erlang.term_to_binary(term, [:deterministic])`, see `key/2`.  XXH3-128
  is not collision-resistant: whoever can choose the terms can build a
  collision on purpose.  For keys from terms that others choose, open the
  cache with `keys: :strong`: 32-byte BLAKE2b-256 keys, all 256 bits
  compared on every lookup.  The deterministic external format is stable
  within one OTP release; keys are not promised to be equal across
  releases.

  ## Copy or reference

  `fetch(key)` copies the value into the caller's heap.  A value whose
  external size (the byte size of `:erlang.term_to_binary(value)`, measured
  at put) is at most `inline_max` (default 8192 bytes) is copied inline;
  a larger one on a dirty CPU scheduler, so no call runs more than a
  fraction of a millisecond on a normal scheduler.  `fetch(key, as: :ref)`
  returns a reference instead: one small term whatever the value's size,
  valid (and keeping the value alive) as long as the term lives, even after
  the entry is evicted.  `value/1` copies the value out of a reference;
  another NIF reads a native program out of one with `ccache_nif.h`.

  Copying a 3.5 MB closure costs milliseconds however it is done: the copy
  goes away only when what runs is a native program held by reference, or
  when a process keeps one copy of the closure for itself.

  ## Single-flight

  `get_or_compile/3` compiles once however many processes miss at the same
  time; the others wait in `receive` with a monitor on the compiler.  See
  its documentation.

  ## The owner process

  `start_link/1` opens the C cache, or re-attaches to it if it is open: a
  crash and restart of the owner keeps every entry.  `stop/1` (or the
  owner's supervisor shutting it down) closes the cache and frees its
  name; references already fetched stay valid.  The cache survives a hot
  upgrade of `CCache.Nif`.  Reads and writes do not go through the owner:
  they are NIF calls from the calling process.  Options can come from the
  application environment (`otp_app:`, see `child_spec/1`).
  """

  use GenServer
  alias CCache.{Flight, Nif}

  @default __MODULE__
  @inline_max 8192

  @typedoc "A 16-byte binary (the key itself) or any term (hashed, see `key/1`)."
  @type key :: binary() | term()
  @typedoc "A reference to a cached value (a NIF resource)."
  @type ref :: reference()

  @compile {:inline, key!: 2}

  # ---- the owner

  @doc """
  A child spec for the cache named by `opts[:name]` (default `CCache`).

  Options: `:name` (an atom, also the owner's registered name), `:max_items`
  (a positive integer or `:infinity`), `:ttl` (milliseconds or `:infinity`),
  `:inline_max` (bytes of external format up to which a copy runs inline;
  a copy costs ~10 ns per word and a byte of external format is at most ~2 words,
  so keep it at most ~32768 to stay under 1 ms on a normal scheduler),
  `:manual_clock` (tests: the clock only moves with `advance_clock/2`),
  `:keys` (`:fast`, the default, or `:strong`: 256-bit BLAKE2b keys for
  caches whose key terms others choose, see `key/2`; fixed at open), and
  `:otp_app` (read the options from the application environment, below).

  ## Configuration from the application environment

  With `otp_app: :my_app`, the options are read from
  `Application.get_env(:my_app, name)`, so a release configures the cache
  in `config/runtime.exs` (or `config/config.exs`):

      # config/runtime.exs
      config :my_app, MyApp.Cache, max_items: 1024, ttl: :timer.minutes(30)

      # the supervision tree
      children = [{CCache, name: MyApp.Cache, otp_app: :my_app}]

  Options given in the child spec win over the environment's.  An unknown
  option or an invalid value fails the start with an `ArgumentError` naming
  it (a misspelled `:max_items` would otherwise leave the cache unbounded).  Without
  `:otp_app`, `config :ccache, <name>, ...` is read the same way (so the
  default instance takes `config :ccache, CCache, max_items: 1024`).
  """
  def child_spec(opts) do
    %{id: {__MODULE__, Keyword.get(opts, :name, @default)}, start: {__MODULE__, :start_link, [opts]}}
  end

  @doc """
  Start the owner of the cache `opts[:name]` (see `child_spec/1`): opens the
  C cache, or attaches to it if it is open (an owner that crashed and was
  restarted finds every entry).  `{:ok, pid}` or `{:error, reason}`
  (`{:error, :too_many_caches}` past 64 caches open at once).
  """
  def start_link(opts \\ []) do
    name = Keyword.get(opts, :name, @default)
    GenServer.start_link(__MODULE__, opts, name: name)
  end

  @doc """
  Stop the cache: its owner exits, every entry leaves, and the name can be
  opened again (a new, empty cache).  References already fetched stay
  valid (their values die with the last of them; the C cache closes then).
  The same happens when the owner's supervisor shuts it down (`:shutdown`,
  e.g. `start_supervised/1` at the end of a test, or the application
  stopping); an owner that crashes keeps the cache for its restart.
  Returns `:ok`.
  """
  def stop(cache \\ @default), do: GenServer.stop(cache, :normal)

  @doc "`:created` or `:attached`: whether this owner made the C cache or found it."
  def attach_status(cache \\ @default), do: GenServer.call(cache, :attach_status)

  @doc false
  def options(opts) do
    name = Keyword.get(opts, :name, @default)
    app = Keyword.get(opts, :otp_app, :ccache)
    env = Application.get_env(app, name, [])
    Keyword.merge(env, opts)
  end

  @options [:name, :max_items, :ttl, :inline_max, :manual_clock, :keys, :otp_app]

  # A misspelled or ill-typed option fails the start, naming it: a cache left
  # unbounded by a typo in config/runtime.exs would not say so otherwise.
  defp validate!(opts) do
    case Keyword.keys(opts) -- @options do
      [] ->
        Enum.each(opts, &check_option!/1)

      unknown ->
        raise ArgumentError,
              "CCache #{inspect(Keyword.get(opts, :name, @default))}: unknown option(s) " <>
                "#{inspect(unknown)}; the options are #{inspect(@options)}"
    end
  end

  defp check_option!({k, v}) when k in [:max_items, :ttl, :inline_max] do
    unless v == :infinity or (is_integer(v) and v > 0) do
      raise ArgumentError, "CCache option #{inspect(k)}: #{inspect(v)} is not a positive integer or :infinity"
    end
  end

  defp check_option!({:manual_clock, v}) when is_boolean(v), do: :ok
  defp check_option!({:keys, v}) when v in [:fast, :strong], do: :ok
  defp check_option!({k, _}) when k in [:name, :otp_app], do: :ok

  defp check_option!({k, v}),
    do: raise(ArgumentError, "CCache option #{inspect(k)}: #{inspect(v)} is not valid (see CCache.child_spec/1)")

  @impl true
  def init(opts) do
    opts = options(opts)
    validate!(opts)
    name = Keyword.get(opts, :name, @default)
    mi = Keyword.get(opts, :max_items, :infinity)
    ttl = Keyword.get(opts, :ttl, :infinity)
    im = Keyword.get(opts, :inline_max, @inline_max)
    manual = Keyword.get(opts, :manual_clock, false)
    keys = Keyword.get(opts, :keys, :fast)
    # so a supervisor's :shutdown reaches terminate/2 (which closes the cache)
    Process.flag(:trap_exit, true)

    case Nif.open(name, mi, ttl, im, manual, keys) do
      {status, ^name} -> {:ok, %{name: name, status: status}}
      {:error, reason} -> {:stop, reason}
    end
  end

  @impl true
  def handle_call(:attach_status, _from, state), do: {:reply, state.status, state}

  @impl true
  def handle_info({:EXIT, _pid, _reason}, state), do: {:noreply, state}

  @impl true
  def terminate(reason, state) do
    # A normal stop or a shutdown closes the cache; a crash keeps it for
    # the restarted owner.
    case reason do
      r when r in [:normal, :shutdown] -> Nif.close(state.name)
      {:shutdown, _} -> Nif.close(state.name)
      _ -> :ok
    end
  end

  # ---- reads and writes

  @doc """
  Look `key` up.  Options: `cache:` (default `CCache`), `as: :copy`
  (default) or `as: :ref`.

  Returns `{:ok, value}`, `{:error, :cache_miss}` or `{:error, :no_cache}`
  (no cache of that name is open).  What `value` is:

    * `as: :copy`, an entry holding a term: a copy of the term in this
      process's heap (yours: keep it, change it, put it elsewhere; putting
      it stores a new copy).
    * `as: :ref`, an entry holding a term: a reference (see `ref_info/1`),
      one small term whatever the value's size; `value/1` copies the term
      out; `put/3` of the reference under another key stores the same
      term (shared, not copied).
    * an entry holding a native program, in both modes: a reference to that
      program.  Another NIF runs it (`ccache_nif.h`'s `get_native`);
      `put/3` of it under another key stores the same program (one program,
      destroyed once), in any process.
  """
  @spec fetch(key, keyword) :: {:ok, term} | {:error, :cache_miss | :no_cache}
  def fetch(key, opts \\ [])
  def fetch(key, []), do: Nif.fetch(@default, key!(@default, key), :copy)
  def fetch(key, as: :ref), do: Nif.fetch(@default, key!(@default, key), :ref)

  def fetch(key, opts) do
    cache = Keyword.get(opts, :cache, @default)
    Nif.fetch(cache, key!(cache, key), Keyword.get(opts, :as, :copy))
  end

  @doc """
  Store `value` under `key` (a later put replaces the entry; then the
  oldest entries leave while more than `max_items` are cached).  Options:
  `cache:`.  Returns `:ok` or `{:error, reason}`.

  `value` is stored as given:

    * a program term made by another NIF with `ccache_nif.h`, or a
      reference to a native program (what `fetch/2` and `get_or_compile/3`
      return for one, in any process): that program, held, not copied;
      every key it is put under shares it.  A program belongs to one cache:
      putting it in another returns `{:error, :other_cache}`.
    * a reference to a term value (`fetch(key, as: :ref)`): that stored
      term, shared (O(1) whatever its size), not a reference stored as a term.
    * any other term: copied into C, on a dirty scheduler unless a bounded
      walk proves it small (a fun always counts as not small, its
      environment being opaque to NIFs).

  Errors: `{:error, :no_cache}`, `{:error, :other_cache}`,
  `{:error, {:ccache, status, text}}` (the C library's status).
  """
  def put(key, value, opts \\ []) do
    cache = Keyword.get(opts, :cache, @default)
    Nif.put(cache, key!(cache, key), value, :ok)
  end

  @doc """
  The value behind a reference.  Returns `{:ok, term}`: a copy of a term
  value (on a dirty scheduler if large), or, for a reference to a native
  program (or a program term), `{:ok, ref}`, the argument itself.

      {:ok, ref} = CCache.fetch(:k, as: :ref)
      {:ok, %{w: [1, 2]}} = CCache.value(ref)

  Raises `ArgumentError` for anything else.
  """
  def value(ref), do: Nif.ref_value(ref)

  @doc """
  What a value returned by `fetch/2` or `get_or_compile/3` is:
  `{:term, external_bytes}` for a reference to a term value, `:native` for
  a reference to a native program or a program term (what a compile
  returned), `:not_a_reference` for anything else (a copy in your heap).
  """
  def ref_info(ref), do: Nif.ref_info(ref)

  @doc "Remove `key`: `:ok` or `{:error, :cache_miss}`.  References stay valid."
  def remove(key, opts \\ []) do
    cache = Keyword.get(opts, :cache, @default)
    Nif.remove(cache, key!(cache, key))
  end

  @doc "Remove every entry.  References stay valid."
  def clear(cache \\ @default), do: Nif.clear(cache)

  @doc """
  The key of a term, to compute once and keep where the same key is used
  often: ccache's fingerprint builder over a domain tag and
  `:erlang.term_to_binary(term, [:deterministic])`.

  Options: `cache:` (the key for that cache: 32 bytes if it was opened with
  `keys: :strong`, else 16) or `keys: :fast | :strong`.  Default: fast.
  Returns the binary: 16 bytes (XXH3-128, fast) or 32 bytes (BLAKE2b-256,
  strong).  A binary of the cache's key size given to any call is the key
  itself; a binary of the other size is hashed as a term.
  """
  def key(term, opts \\ []) do
    mode =
      case opts do
        [] -> false
        [cache: c] -> c
        [keys: :fast] -> false
        [keys: :strong] -> true
      end

    case Nif.hash(mode, :erlang.term_to_binary(term, [:deterministic])) do
      k when is_binary(k) -> k
      {:error, _} = e -> raise ArgumentError, "CCache.key: #{inspect(e)}"
    end
  end

  defp key!(_cache, k) when is_binary(k) and (byte_size(k) == 16 or byte_size(k) == 32), do: k
  defp key!(cache, term), do: key(term, cache: cache)

  # ---- bounds and stats

  @doc """
  Change bounds at runtime: `max_items`, `ttl` (milliseconds) and
  `inline_max` (bytes), each a positive integer or `:infinity`; the ones not
  given stay.  `limits` is a keyword list or a map, so what `limits/1`
  returns is accepted as it is.  Returns `:ok` or `{:error, reason}`;
  raises `ArgumentError` for an unknown key or a bad value.

      l = CCache.limits(MyCache)
      :ok = CCache.set_limits(MyCache, %{l | max_items: 2048})
  """
  def set_limits(cache \\ @default, limits) when is_list(limits) or is_map(limits) do
    {:ok, cur} = Nif.limits(cache)

    new =
      Enum.reduce(limits, cur, fn
        {k, v}, acc when k in [:max_items, :ttl, :inline_max] -> Map.put(acc, k, v)
        other, _ -> raise ArgumentError, "set_limits: unknown limit #{inspect(other)}"
      end)

    Nif.set_limits(cache, new.max_items, new.ttl, new.inline_max)
  end

  @doc "`%{max_items: _, ttl: _, inline_max: _}` (each a positive integer or `:infinity`), which `set_limits/2` accepts."
  def limits(cache \\ @default) do
    {:ok, l} = Nif.limits(cache)
    l
  end

  @doc """
  Counters and gauges: ccache's (`hits`, `misses`, `inserts`, `replaced`,
  `evicted_capacity`, `evicted_ttl`, `removed`, `cleared`, `items`,
  `programs` (native programs alive), `closures_destroyed`,
  `natives_destroyed`, `leases_out` (references and copies in progress))
  and the binding's (`puts_inline`, `puts_dirty`, `copies_inline`,
  `copies_dirty`).
  """
  def stats(cache \\ @default) do
    {:ok, s} = Nif.stats(cache)
    s
  end

  @doc false
  def advance_clock(cache, ms), do: Nif.advance_clock(cache, ms)

  # ---- single-flight

  @doc """
  Fetch `key`, or compute it once however many processes ask at the same
  time.

  `fun` runs in the first process that misses and returns `{:ok, value}`
  (stored with `put/3`, then returned) or `{:error, reason}` (returned,
  never cached).  Every other process that misses meanwhile waits in
  `receive`, monitoring the compiler, and gets the same result.  If `fun`
  raises, throws or exits, the waiters get
  `{:error, {:compile_crashed, kind, reason}}` and the compiler re-raises.
  If the compiler process dies, one waiter takes the compile over, so no
  waiter is left blocked.  Calling it for the key one's own `fun` is
  computing returns `{:error, :deadlock}`.  Nothing blocks a scheduler
  thread.  Options: `cache:`, `as:` (as for `fetch/2`).

  Returns `{:ok, value}` or `{:error, reason}`.  What `value` is:

    * the compiler, `as: :copy`: `fun`'s value itself (a program term for a
      native program: `ref_info/1` says `:native`);
    * a waiter or a hit, `as: :copy`: as `fetch/2` (a copy of a term, a
      reference to a native program);
    * `as: :ref`, everyone: a reference to the value just stored, even if
      the entry was evicted at once (never a `:cache_miss` for a value
      that was compiled).

  Each of them can be `put/3` under other keys and stays what it is (a
  native program stays that shared program).
  """
  def get_or_compile(key, fun, opts \\ []) when is_function(fun, 0) do
    cache = Keyword.get(opts, :cache, @default)
    as = Keyword.get(opts, :as, :copy)
    k = key!(cache, key)

    case Nif.fetch(cache, k, as) do
      {:error, :cache_miss} -> Flight.join(cache, k, fun, as, make_ref(), nil)
      other -> other
    end
  end

  @doc false
  def flight_waiters(key, cache \\ @default), do: Nif.flight_waiters(cache, key!(cache, key))
end
