"""Run by ccache-numba.pth at interpreter start, only when
CLOSURE_CACHE_NUMBA_DIR or CLOSURE_CACHE_NUMBA_REDIS (or a deprecated alias,
CCACHE_NUMBA_DIR / CCACHE_NUMBA_REDIS) is set: installs ccache.numba right after numba is
first imported (numba is not imported by this hook itself)."""
import importlib.abc
import importlib.util
import sys


def _install():
    from ccache.numba import install_from_env
    install_from_env()


class _AfterNumba(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name != "numba":
            return None
        sys.meta_path.remove(self)
        try:
            spec = importlib.util.find_spec(name)
        finally:
            pass
        if spec is None or spec.loader is None:
            return spec
        loader = spec.loader
        exec_module = loader.exec_module

        def exec_then_install(module):
            exec_module(module)
            _install()

        loader.exec_module = exec_then_install
        return spec


if "numba" in sys.modules:
    _install()
else:
    sys.meta_path.insert(0, _AfterNumba())
