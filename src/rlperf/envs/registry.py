"""Environment registry: every vectorised environment the trainer can run, by name.

``make_vec("cartpole", 64, seed=1)`` builds rlperf's native batched CartPole;
``make_vec("gym:LunarLander-v3", 8)`` wraps any registered gymnasium id. Each environment
joins with one :func:`register` call (``envs/__init__.py`` registers cartpole, catch, grid,
petri and robots).

Packages that register their gymnasium ids when imported (ale-py's ``ALE/...``, minigrid) are
reached by gymnasium's own ``module:id`` form, ``gym:ale_py:ALE/Pong-v5``: the module is imported
first, in this process and in every env worker (each builds its envs from the name). A bare id
that gymnasium does not know loads the ``gymnasium.envs`` entry points of its namespace (the
plugin mechanism of gymnasium 0.26-0.29, which some packages still declare) before it is called
unknown; the error then names the ``module:id`` form, with the module when one named after the
namespace is installed (:func:`gym_env_id`).

Every environment returned here follows gymnasium's vector API with ``AutoresetMode.SAME_STEP``
and reports final observations, final infos and episode statistics as documented in
``envs/cartpole.py`` and ``envs/episodes.py``: that is the contract the trainer relies on.
``envs/contract.py`` holds what every env checks alike (action batches, seeds) and the spaces
:func:`make_vec` refuses (Graph, Sequence, OneOf, Text).
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import importlib.util
import inspect
from collections.abc import Callable, Iterable
from typing import Any

from gymnasium.vector import VectorEnv

from rlperf.envs.contract import check_spaces
from rlperf.envs.spec import UnsupportedSpaceError

EnvFactory = Callable[..., VectorEnv]

GYM_PREFIX = "gym:"
# gymnasium 0.26-0.29 loaded this entry-point group at import (``load_plugin_envs``); 1.x no
# longer does, but packages may still declare it: its entry named after a namespace registers
# that namespace's ids, ``__root__`` ids without one.
PLUGIN_GROUP = "gymnasium.envs"
_REGISTRY: dict[str, EnvFactory] = {}
# gymnasium's env modules that need a package gymnasium does not install: entry point prefix ->
# (the package, the rlperf extra that installs it).
EXTRAS = {"gymnasium.envs.mujoco": ("mujoco", "mujoco")}


class UnknownEnvError(ValueError):
    """Raised for an environment name that is neither registered nor a gymnasium id."""


class EnvOptionError(ValueError):
    """An environment option (``--env-option KEY=VALUE``) the environment does not take."""


def register(name: str, factory: EnvFactory) -> None:
    """Make ``factory(num_envs, **kwargs)`` available as ``make_vec(name, ...)``."""
    if name.startswith(GYM_PREFIX):
        raise ValueError(f"names starting with {GYM_PREFIX!r} are reserved for gymnasium ids")
    _REGISTRY[name] = factory


def unregister(name: str) -> None:
    """Remove ``name`` from the registry (KeyError if it is not registered)."""
    del _REGISTRY[name]


def factory_of(name: str) -> EnvFactory | None:
    """The factory registered as ``name`` (None for a gymnasium id or an unknown name)."""
    return _REGISTRY.get(name)


def registered() -> list[str]:
    """Names of the registered environments (gymnasium ids are reachable as ``gym:<id>``)."""
    return sorted(_REGISTRY)


def did_you_mean(name: str, known: Iterable[str]) -> str | None:
    """The known name closest to ``name``, ignoring case (``Cartpole-v1``: ``CartPole-v1``), or
    None when none is close (difflib's ratio of at least 0.8)."""
    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(name.lower(), by_lower, n=1, cutoff=0.8)
    return by_lower[close[0]] if close else None


def check_env_name(name: str) -> None:
    """Raise :class:`UnknownEnvError` with a one-line message unless ``name`` can be built
    (a ``gym:<module>:<id>`` imports its module here)."""
    if name.startswith(GYM_PREFIX):
        gym_env_id(name)
        return
    if name not in _REGISTRY:
        known = ", ".join(registered())
        raise UnknownEnvError(
            f"unknown env {name!r}: choose one of {known}, or gym:<id> for a gymnasium id"
        )


def gym_env_id(name: str) -> str:
    """The registered gymnasium id that ``gym:<id>`` or ``gym:<module>:<id>`` names.

    ``<module>`` is imported first (packages that register their ids on import, as gymnasium's
    own ``make("module:id")`` does). A bare id gymnasium does not know loads the
    ``gymnasium.envs`` entry points of its namespace (:data:`PLUGIN_GROUP`).

    Raises:
        UnknownEnvError: one line, for a module that cannot be imported or an id still unknown
            after; it names the ``gym:<module>:<id>`` form. Also for a known id whose env
            needs an rlperf extra that is not installed (:func:`check_extra_installed`).
    """
    import gymnasium

    module, sep, env_id = name[len(GYM_PREFIX) :].partition(":")
    if not sep:
        module, env_id = "", module
    if module:
        _import_env_module(module, name)
    failed = ""  # a plugin that failed to load, for the error
    if env_id not in gymnasium.registry and not module:
        failed = _load_plugins(env_id)
    if env_id in gymnasium.registry:
        check_extra_installed(name, env_id)
        return env_id
    close = did_you_mean(env_id, gymnasium.registry)
    prefix = f"{GYM_PREFIX}{module}:" if module else GYM_PREFIX
    if close:
        hint = f": did you mean {prefix}{close}?"
    elif module:
        hint = f" (module {module!r} was imported and did not register it)"
    else:
        hint = _module_hint(env_id)
    raise UnknownEnvError(f"unknown gymnasium id {env_id!r} in env {name!r}{hint}{failed}")


def check_extra_installed(name: str, env_id: str) -> None:
    """UnknownEnvError (one line naming the extra) where gymnasium's ``env_id`` is made by a
    module of :data:`EXTRAS` whose package is not installed: gymnasium registers its MuJoCo ids
    whether or not ``mujoco`` is there, and making one without it ends in a traceback."""
    import gymnasium

    entry_point = str(gymnasium.spec(env_id).entry_point)
    for prefix, (package, extra) in EXTRAS.items():
        if entry_point.startswith(prefix) and importlib.util.find_spec(package) is None:
            raise UnknownEnvError(
                f"env {name!r} needs the {package} package, which is not installed: "
                f"pip install 'rlperf[{extra}]'"
            )


def _import_env_module(module: str, name: str) -> None:
    """Import the ``<module>`` of ``gym:<module>:<id>`` (UnknownEnvError, one line, if it
    cannot be: not installed, or its import raised)."""
    try:
        importlib.import_module(module)
    except ModuleNotFoundError as e:
        if e.name is None or not (module == e.name or module.startswith(f"{e.name}.")):
            raise UnknownEnvError(
                f"env {name!r}: importing module {module!r} failed: {_first_line(e)}"
            ) from e
        raise UnknownEnvError(
            f"env {name!r}: no module named {module!r} to import (the part before the id in "
            f"{GYM_PREFIX}<module>:<id>; is its package installed?)"
        ) from e
    except Exception as e:  # the module's own code raised: one line, not its traceback
        raise UnknownEnvError(
            f"env {name!r}: importing module {module!r} failed: {type(e).__name__}: "
            f"{_first_line(e)}"
        ) from e


def _load_plugins(env_id: str) -> str:
    """Run the :data:`PLUGIN_GROUP` entry points that may register ``env_id``: the one named
    after its namespace (inside gymnasium's ``namespace`` context, as gymnasium 0.29 did) and
    ``__root__``. Returns "" or, when one failed, a clause naming it for the error message."""
    from gymnasium.envs.registration import namespace

    ns = env_id.rpartition("/")[0] or None
    failed = []
    for entry in importlib.metadata.entry_points(group=PLUGIN_GROUP):
        if entry.name not in (ns, "__root__"):
            continue
        try:
            loaded = entry.load()
            if callable(loaded):
                if entry.name == ns:
                    with namespace(ns):
                        loaded()
                else:
                    loaded()
        except Exception as e:  # a broken plugin must not hide the others, nor the real error
            failed.append(f"{entry.value} ({type(e).__name__}: {_first_line(e)})")
    return f"; the {PLUGIN_GROUP} entry point {', '.join(failed)} failed" if failed else ""


def _module_hint(env_id: str) -> str:
    """The error's hint for an unknown bare id: the ``module:id`` form, naming an installed
    module called after the id's namespace when there is one (``ALE``: ``ale_py``); a guess
    for the message only, nothing is imported."""
    ns = env_id.rpartition("/")[0]
    for candidate in (f"{ns.lower()}_py", ns.lower()) if ns else ():
        if candidate.isidentifier() and importlib.util.find_spec(candidate) is not None:
            return f": did you mean {GYM_PREFIX}{candidate}:{env_id}?"
    return (
        f" (an id that a package registers when imported needs that module: "
        f"{GYM_PREFIX}<module>:{env_id})"
    )


def make_vec(name: str, num_envs: int, seed: int | None = None, **kwargs: Any) -> VectorEnv:
    """Build ``num_envs`` copies of environment ``name`` as one vector env, reset with ``seed``.

    The returned env has already been reset once (with ``seed`` when given); the trainer calls
    ``reset(seed=...)`` again itself, so this only makes the env immediately usable.

    Raises:
        UnknownEnvError: ``name`` is neither registered nor a gymnasium id (one line).
        EnvOptionError: an option the env does not take, or one it refused (one line).
        UnsupportedSpaceError: a Graph, Sequence, OneOf or Text space (``envs/contract.py``),
            before the first reset; the env is closed.
    """
    # A gym:<module>:<id> imports its module here: in an env worker too, which builds its
    # share from the name alone.
    env_id = gym_env_id(name) if name.startswith(GYM_PREFIX) else None
    if env_id is None:
        check_env_name(name)
    if num_envs <= 0:
        raise ValueError(f"num_envs must be positive, got {num_envs}")
    if env_id is not None:
        from rlperf.envs.gym_adapter import make_gym_vec

        factory: EnvFactory = make_gym_vec
        args: tuple[Any, ...] = (env_id, num_envs)
    else:
        factory = _REGISTRY[name]
        args = (num_envs,)
        check_options(name, factory, kwargs)
    try:
        env = factory(*args, **kwargs)
    except UnsupportedSpaceError:
        raise
    except (TypeError, ValueError) as e:
        if not kwargs:
            raise
        # Factories validate their own options; say which env refused them, on one line.
        raise EnvOptionError(f"env {name!r}: {_first_line(e)}") from e
    try:
        check_spaces(name, env)
    except UnsupportedSpaceError:
        env.close()
        raise
    env.reset(seed=seed)
    return env


def env_options(factory: EnvFactory) -> list[str] | None:
    """Keyword options ``factory`` takes besides ``num_envs``; None if it takes any (**kwargs)."""
    params = list(inspect.signature(factory).parameters.values())[1:]
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return None
    return [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]


def options_of(name: str) -> list[str] | None:
    """The ``--env-option`` names env ``name`` takes; None when it takes any (gymnasium ids and
    factories with ``**kwargs``); [] for an unknown name."""
    if name.startswith(GYM_PREFIX):
        return None
    factory = _REGISTRY.get(name)
    return [] if factory is None else env_options(factory)


def check_options(name: str, factory: EnvFactory, options: dict[str, Any]) -> None:
    """Raise :class:`EnvOptionError` for an option ``factory`` does not take."""
    known = env_options(factory)
    if known is None:
        return
    for key in options:
        if key not in known:
            listed = ", ".join(known) if known else "none"
            raise EnvOptionError(f"env {name!r} has no option {key!r} (options: {listed})")


def int_option(name: str, value: object, low: int, high: int | None = None) -> int:
    """``value`` if it is an int (not a bool) in ``[low, high]`` (``high`` None: no upper bound);
    else the one-line ValueError a factory raises for a bad option (see :func:`make_vec`)."""
    if (
        isinstance(value, bool)
        or not isinstance(value, int)
        or value < low
        or (high is not None and value > high)
    ):
        span = f">= {low}" if high is None else f"in {low}..{high}"
        raise ValueError(f"{name} must be an integer {span}, got {value!r}")
    return value


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
