"""Build the ccache package: the C extension ccache._ccache.

By default the extension compiles the C library's own sources into itself
(the list and the definitions come from src/sources.txt, the one list CMake,
cargo and mix read too), linking Debian's xxhash, hiredis and libsodium, so
that `pip install bindings/python` needs nothing but the source tree.

Environment:
  CCACHE_SOURCE_DIR   the project root (default: found upwards from this file,
                      the directory that holds src/sources.txt)
  CCACHE_USE_INSTALLED=1
                      link an installed libccache instead (found with
                      `pkg-config ccache`; PKG_CONFIG_PATH as pkg-config reads
                      it), compiling none of the library's sources
"""
import os
import shlex
import subprocess
import sys

from setuptools import Extension, setup
from setuptools.command.build_py import build_py


class build_py_with_pth(build_py):
    """Also put ccache-numba.pth at the top of the install (site-packages):
    the import hook that installs ccache.numba in every process where
    CLOSURE_CACHE_NUMBA_DIR or CLOSURE_CACHE_NUMBA_REDIS (or a deprecated alias)
    is set, and does nothing else."""

    def run(self):
        super().run()
        self.copy_file(os.path.join(HERE, "ccache-numba.pth"),
                       os.path.join(self.build_lib, "ccache-numba.pth"), preserve_mode=False)

HERE = os.path.dirname(os.path.abspath(__file__))


def project_root():
    env = os.environ.get("CCACHE_SOURCE_DIR")
    if env:
        if not os.path.isfile(os.path.join(env, "src", "sources.txt")):
            sys.exit(f"CCACHE_SOURCE_DIR={env}: no src/sources.txt there")
        return os.path.abspath(env)
    d = HERE
    while True:
        if os.path.isfile(os.path.join(d, "src", "sources.txt")):
            return d
        parent = os.path.dirname(d)
        if parent == d:
            sys.exit(
                "setup.py: cannot find the ccache source tree (src/sources.txt) above "
                f"{HERE}; set CCACHE_SOURCE_DIR to the project root, or "
                "CCACHE_USE_INSTALLED=1 to link an installed libccache"
            )
        d = parent


def have_header(name):
    for inc in ("/usr/include", "/usr/local/include"):
        if os.path.isfile(os.path.join(inc, name)):
            return True
    return False


def read_sources(root, conditions):
    """src/sources.txt: 'src PATH [when]' and 'define NAME[=VALUE] [when]'."""
    sources, defines = [], []
    with open(os.path.join(root, "src", "sources.txt"), encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split()
            kind, item = parts[0], parts[1]
            when = parts[2] if len(parts) > 2 else ""
            if when not in ("", "redis", "!redis", "sodium"):
                sys.exit(f"src/sources.txt: unknown condition {when!r} in {line!r}")
            if when == "redis" and not conditions["redis"]:
                continue
            if when == "!redis" and conditions["redis"]:
                continue
            if when == "sodium" and not conditions["sodium"]:
                continue
            if kind == "src":
                sources.append(os.path.join(root, item))
            elif kind == "define":
                name, _, value = item.partition("=")
                defines.append((name, value or None))
            else:
                sys.exit(f"src/sources.txt: unknown entry {line!r}")
    return sources, defines


def extension():
    # The binding's own sources (src/): the module, Key and Fingerprint, Cache
    # (its type, its lookups, its stats and events), the tiers and programs.
    own = [os.path.join("src", f) for f in ("module.c", "key.c", "cache.c", "cache_lookup.c",
                                            "cache_stats.c", "tier.c")]
    args = ["-std=gnu11", "-fvisibility=hidden", "-Wall", "-Wextra", "-Wno-missing-field-initializers"]
    if os.environ.get("CCACHE_USE_INSTALLED") == "1":
        def pc(*a):
            return shlex.split(subprocess.check_output(["pkg-config", *a, "ccache"], text=True))
        cflags, libs = pc("--cflags"), pc("--libs")
        return Extension(
            "ccache._ccache", sources=own,
            include_dirs=[f[2:] for f in cflags if f.startswith("-I")],
            library_dirs=[f[2:] for f in libs if f.startswith("-L")],
            libraries=[f[2:] for f in libs if f.startswith("-l")],
            runtime_library_dirs=[f[2:] for f in libs if f.startswith("-L")],
            extra_compile_args=args,
        )
    root = project_root()
    conditions = {"redis": have_header("hiredis/hiredis.h"), "sodium": have_header("sodium.h")}
    sources, defines = read_sources(root, conditions)
    libraries = ["xxhash", "pthread"]
    if conditions["redis"]:
        libraries.append("hiredis")
    if conditions["sodium"]:
        libraries.append("sodium")
    # Absolute paths: distutils puts each object under build_temp at the
    # source's full path (a relative ../../src would land beside ours).
    return Extension(
        "ccache._ccache",
        sources=own + sources,
        include_dirs=[os.path.join(root, "include"), os.path.join(root, "src")],
        define_macros=defines,
        libraries=libraries,
        extra_compile_args=args,
    )


setup(
    name="ccache",
    version="0.2.0",
    description="A compile-closure cache for ML runtimes (Python binding), and numba's compile cache on it",
    packages=["ccache"],
    package_data={"ccache": ["py.typed", "*.pyi"]},
    cmdclass={"build_py": build_py_with_pth},
    ext_modules=[extension()],
    python_requires=">=3.9",
)
