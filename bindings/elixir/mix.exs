# The mix project of the Elixir binding: `{:ccache, path: ".../bindings/elixir"}`
# in an application's deps.  No hex packages: the NIF is built by the
# compiler step below (Mix.Tasks.Compile.CcacheNif) with the system C
# compiler, from the C library's one source list (../../src/sources.txt),
# into the application's priv/ (where CCache.Nif and a release find it).
defmodule CCache.MixProject do
  use Mix.Project

  def project do
    [
      app: :ccache,
      version: "0.2.0",
      elixir: "~> 1.14",
      compilers: [:ccache_nif] ++ Mix.compilers(),
      elixirc_paths: elixirc_paths(Mix.env()),
      deps: [],
      test_paths: ["test"],
      test_pattern: "*_test.exs"
    ]
  end

  def application, do: [extra_applications: []]

  defp elixirc_paths(:test), do: ["lib", "test/support"]
  defp elixirc_paths(_), do: ["lib"]
end

defmodule Mix.Tasks.Compile.CcacheNif do
  @moduledoc """
  Builds `priv/ccache_nif.so` (and, in the test environment,
  `priv/ccache_test_native.so`) with the system C compiler (`cc`, or `$CC`
  when set): the C library's sources and definitions from `src/sources.txt`
  (the Redis tier stubbed: the binding has no tiers; strong keys with
  libsodium when it links), archived and linked in with its symbols hidden,
  plus `c_src/*.c`.  Rebuilds only when a source, header, the list or this
  file is newer than the library.
  """
  use Mix.Task.Compiler

  @impl true
  def run(_args) do
    here = Path.dirname(Mix.Project.project_file())
    root = Path.expand("../..", here)
    list = Path.join(root, "src/sources.txt")

    unless File.exists?(list) do
      Mix.raise("ccache: #{list} not found (bindings/elixir builds from the project's sources)")
    end

    priv = Path.join(Mix.Project.app_path(), "priv")
    obj = Path.join(Mix.Project.app_path(), "obj")
    File.mkdir_p!(priv)
    File.mkdir_p!(obj)
    sodium = links?("#include <sodium.h>\nint main(void) { return sodium_init(); }\n", ["-lsodium"])
    {defines, sources} = read_list(list, sodium)
    nif = Path.join(priv, "ccache_nif.so")

    inputs =
      [list, Path.join(here, "mix.exs")] ++
        Enum.map(sources, &Path.join(root, &1)) ++
        Path.wildcard(Path.join(root, "src/**/*.h")) ++
        Path.wildcard(Path.join(root, "include/**/*.h")) ++
        Path.wildcard(Path.join(here, "c_src/*.[ch]")) ++ Path.wildcard(Path.join(here, "include/*.h"))

    built_nif =
      if stale?(nif, inputs) do
        build_nif(root, here, obj, nif, defines, sources, sodium)
        true
      else
        false
      end

    built_test =
      if Mix.env() == :test do
        test_nif = Path.join(priv, "ccache_test_native.so")
        test_src = Path.join(here, "test/c_src/test_native.c")

        if stale?(test_nif, [test_src, Path.join(here, "include/ccache_nif.h")]) do
          cc!([test_src, "-shared", "-fPIC", "-O2", "-I", Path.join(here, "include"), "-I", erts_include(), "-o", test_nif, "-ldl"])
          true
        end
      end

    if built_nif or built_test, do: {:ok, []}, else: {:noop, []}
  end

  defp build_nif(root, here, obj, nif, defines, sources, sodium) do
    Mix.shell().info("ccache: building #{Path.relative_to_cwd(nif)} (#{length(sources)} sources, libsodium #{if sodium, do: "on", else: "off"})")
    lib_flags = ["-std=c11", "-O2", "-fPIC", "-fvisibility=hidden", "-I", Path.join(root, "include"), "-I", Path.join(root, "src")] ++ Enum.map(defines, &"-D#{&1}")

    objs =
      sources
      |> Task.async_stream(
        fn src ->
          o = Path.join(obj, String.replace(src, "/", "_") <> ".o")
          cc!(lib_flags ++ ["-c", Path.join(root, src), "-o", o])
          o
        end,
        timeout: :infinity,
        max_concurrency: System.schedulers_online()
      )
      |> Enum.map(fn {:ok, o} -> o end)

    archive = Path.join(obj, "libccache.a")
    File.rm(archive)
    {out, rc} = System.cmd("ar", ["rcs", archive | objs], stderr_to_stdout: true)
    if rc != 0, do: Mix.raise("ccache: ar failed:\n" <> out)

    nif_srcs = Path.wildcard(Path.join(here, "c_src/*.c"))

    cc!(
      ["-std=c11", "-O2", "-fPIC", "-shared", "-fvisibility=hidden", "-D_POSIX_C_SOURCE=200809L"] ++
        ["-I", erts_include(), "-I", Path.join(here, "include"), "-I", Path.join(root, "include")] ++
        nif_srcs ++
        ["-o", nif, archive, "-Wl,--exclude-libs,ALL", "-lxxhash"] ++
        if(sodium, do: ["-lsodium"], else: []) ++ ["-ldl", "-lpthread"]
    )
  end

  # src/sources.txt: "src <path> [when]" and "define <NAME[=VALUE]> [when]";
  # when is "", "redis", "!redis" or "sodium".
  defp read_list(list, sodium) do
    entries =
      for line <- File.read!(list) |> String.split("\n"),
          line = line |> String.split("#", parts: 2) |> hd() |> String.trim(),
          line != "" do
        case String.split(line) do
          [kind, what] -> {kind, what, ""}
          [kind, what, wh] -> {kind, what, wh}
          _ -> Mix.raise("ccache: src/sources.txt: bad line #{inspect(line)}")
        end
      end

    wanted =
      Enum.filter(entries, fn {_, _, wh} ->
        case wh do
          "" -> true
          "!redis" -> true
          "redis" -> false
          "sodium" -> sodium
          other -> Mix.raise("ccache: src/sources.txt: unknown condition #{inspect(other)}")
        end
      end)

    {for({"define", d, _} <- wanted, do: d), for({"src", s, _} <- wanted, do: s)}
  end

  defp erts_include do
    root = :code.root_dir() |> to_string()
    erts = Path.join([root, "erts-#{:erlang.system_info(:version)}", "include"])
    if File.exists?(Path.join(erts, "erl_nif.h")), do: erts, else: Path.join(root, "usr/include")
  end

  defp cc, do: System.get_env("CC") || System.find_executable("cc") || Mix.raise("ccache: no C compiler (cc) on PATH")

  defp cc!(args) do
    {out, rc} = System.cmd(cc(), args, stderr_to_stdout: true)
    if rc != 0, do: Mix.raise("ccache: #{cc()} #{Enum.join(args, " ")} failed:\n" <> out)
    out
  end

  defp links?(program, libs) do
    dir = Path.join(System.tmp_dir!(), "ccache_probe_#{System.unique_integer([:positive])}")
    File.mkdir_p!(dir)
    src = Path.join(dir, "probe.c")
    File.write!(src, program)
    {_, rc} = System.cmd(cc(), [src, "-o", Path.join(dir, "probe")] ++ libs, stderr_to_stdout: true)
    File.rm_rf!(dir)
    rc == 0
  end

  defp stale?(target, inputs) do
    case File.stat(target, time: :posix) do
      {:ok, %{mtime: t}} -> Enum.any?(inputs, fn i -> File.stat!(i, time: :posix).mtime > t end)
      _ -> true
    end
  end
end
