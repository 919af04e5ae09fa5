defmodule CCache.Nif do
  @moduledoc """
  The NIF functions behind `CCache` (`ccache_nif.so`).  Use `CCache`; the
  only function meant for other code is `so_path/0`, for NIF libraries that
  use `ccache_nif.h`.

  The library is found at `$CLOSURE_CACHE_ELIXIR_NIF` (a path without the
  `.so`) when that is set, else in the `:ccache` application's `priv/`
  (`ccache_nif.so`, where the mix build puts it and a release copies it),
  else at the path the CMake build baked in.
  """

  @on_load :load_nif
  @built_path System.get_env("CLOSURE_CACHE_ELIXIR_NIF", "ccache_nif")

  @doc false
  def load_nif do
    path = System.get_env("CLOSURE_CACHE_ELIXIR_NIF") || priv_path("ccache_nif") || @built_path
    :erlang.load_nif(String.to_charlist(path), 0)
  end

  @doc false
  # `<priv>/<name>` when the :ccache application's priv/ holds `<name>.so`.
  def priv_path(name) do
    case :code.priv_dir(:ccache) do
      {:error, _} ->
        nil

      dir ->
        p = Path.join(to_string(dir), name)
        if File.exists?(p <> ".so"), do: p
    end
  end

  @doc "The path of the loaded NIF library, for `ccache_nif_api_get()` in `ccache_nif.h`."
  def so_path, do: :erlang.nif_error(:not_loaded)

  @doc false
  def open(_name, _max_items, _ttl, _inline_max, _manual_clock, _keys), do: :erlang.nif_error(:not_loaded)
  @doc false
  def set_limits(_name, _max_items, _ttl, _inline_max), do: :erlang.nif_error(:not_loaded)
  @doc false
  def close(_name), do: :erlang.nif_error(:not_loaded)
  @doc false
  def limits(_name), do: :erlang.nif_error(:not_loaded)
  @doc false
  def stats(_name), do: :erlang.nif_error(:not_loaded)
  @doc false
  def remove(_name, _key), do: :erlang.nif_error(:not_loaded)
  @doc false
  def clear(_name), do: :erlang.nif_error(:not_loaded)
  @doc false
  def advance_clock(_name, _ms), do: :erlang.nif_error(:not_loaded)
  @doc false
  def hash(_mode, _bytes), do: :erlang.nif_error(:not_loaded)
  @doc false
  def put(_name, _key, _value, _answer), do: :erlang.nif_error(:not_loaded)
  @doc false
  def fetch(_name, _key, _mode), do: :erlang.nif_error(:not_loaded)
  @doc false
  def ref_value(_ref), do: :erlang.nif_error(:not_loaded)
  @doc false
  def ref_info(_ref), do: :erlang.nif_error(:not_loaded)
  @doc false
  def flight_join(_name, _key, _wref, _dead), do: :erlang.nif_error(:not_loaded)
  @doc false
  def flight_finish(_name, _key, _result), do: :erlang.nif_error(:not_loaded)
  @doc false
  def flight_waiters(_name, _key), do: :erlang.nif_error(:not_loaded)
  @doc false
  def load_info, do: :erlang.nif_error(:not_loaded)
end
