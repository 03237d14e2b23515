"""Any registered gymnasium environment as an rlperf vector env (``make_vec("gym:<id>", n)``).

:class:`GymVecEnv`: gymnasium's ``SyncVectorEnv`` in ``AutoresetMode.SAME_STEP`` with the
episode statistics of gymnasium's ``RecordEpisodeStatistics`` folded into its step, so every
info key the wrapped env gives (``prob`` of ``FrozenLake-v1``, ...) comes through with its
``_key`` mask, as do ``final_info``/``_final_info`` and ``episode``/``_episode``, and
``np_random_seed`` is SyncVectorEnv's tuple of the sub-envs' seeds (``seed, seed + 1, ...``
after ``reset(seed=seed)``). Two differences, both for the trainer:

- ``infos["final_obs"]`` is dense for observation spaces batched into one array: gymnasium
  gives an object array holding ``None`` for the sub-environments that did not finish; here it
  is the batch with zeros in those rows, masked out by ``_final_obs``, so the critic can take it
  whole. Dict and Tuple spaces keep gymnasium's object array (``envs/contract.py``).
- actions are checked for shape and dtype on every step (``envs/contract.py``).

Observation and action spaces: Box, Discrete, MultiDiscrete, MultiBinary and Dict/Tuple of
those; Graph, Sequence, OneOf and Text are refused when the env is made (``registry.make_vec``).

**Wrappers** (``wrappers=``, from Python or as ``--env-option wrappers=...``): gymnasium wrappers
of each sub-env, given as callables or as text (:func:`parse_wrappers`:
``"FlattenObservation,ClipAction"``, ``"gymnasium.wrappers:TimeLimit(max_episode_steps=100)"``);
text pickles, so env workers take the same option and build the same chain. They go inside each
sub-env, through ``gymnasium.make_vec(..., wrappers=...)``. The episode statistics stay the env's
own: :class:`EnvEpisodes` sits below the first wrapper of each sub-env and records the rewards
and steps of the env gymnasium makes for the id, so a reward wrapper (NormalizeReward,
ClipReward) changes what the trainer learns from, never the return it logs
(:class:`GymVecEnv` turns them into ``episode``/``_episode``).
"""

from __future__ import annotations

import ast
import difflib
import importlib
import re
import time
import warnings
from collections.abc import Callable
from copy import deepcopy
from functools import partial
from typing import Any, cast

import gymnasium
import numpy as np
from gymnasium.vector import AutoresetMode, SyncVectorEnv, VectorEnv, VectorWrapper
from gymnasium.vector.utils import concatenate, iterate

from rlperf.envs.contract import ARRAY_SPACES, ActionCheck

WRAPPERS_OPTION = "wrappers"


class WrapperError(ValueError):
    """A wrapper of the ``wrappers`` option that cannot be found, parsed or applied (one line;
    ``registry.make_vec`` reports it as the env's EnvOptionError)."""


# One wrapper in the text form: a name (gymnasium.wrappers), module:Name or a dotted path, and
# optionally its arguments in parentheses.
_SPEC = re.compile(r"(?P<target>[A-Za-z_][\w.]*(?::[A-Za-z_][\w.]*)?)\s*(?:\((?P<args>.*)\))?",
                   re.DOTALL)  # fmt: skip


class GymVecEnv(SyncVectorEnv):
    """gymnasium's ``SyncVectorEnv`` in ``AutoresetMode.SAME_STEP`` with the layers rlperf
    stacked on it folded into its step: the episode statistics (as gymnasium's vector
    ``RecordEpisodeStatistics`` lays them out, or from each sub-env's :class:`EnvEpisodes`
    given ``wrappers``), the dense ``final_obs`` and the action check (module docstring).

    Why one class: at one HalfCheetah env, SyncVectorEnv.step cost ~20 us beyond the env's own
    ~41 us (the generic ``iterate`` and ``concatenate``, a deepcopy of the batch) and the two
    wrappers above it another ~11 us; MuJoCo's physics is ~30 us of the step. Here the rows
    are written into the batch as they come and each array is built once per step. Everything
    else (``reset``, ``call``, ``render``, the spaces, ``_add_info``) is SyncVectorEnv's.
    """

    def __init__(self, envs: list[gymnasium.Env], recorded: bool = False) -> None:
        """``envs``: the sub-envs (made by ``gymnasium.make_vec``). ``recorded``: each has an
        :class:`EnvEpisodes` below the user's wrappers, whose episodes are reported instead
        of the sum of the rewards the top wrapper gives."""
        made: list[Callable[[], gymnasium.Env]] = [partial(_itself, env) for env in envs]
        super().__init__(made, autoreset_mode=AutoresetMode.SAME_STEP)
        n = self.num_envs
        self._check_actions = ActionCheck(self.action_space)
        self._dense = isinstance(self.single_observation_space, ARRAY_SPACES)
        self._rows_of = (None if isinstance(self.single_action_space, ARRAY_SPACES)
                         else partial(iterate, self.action_space))  # fmt: skip
        self._returns, self._lengths = np.zeros(n), np.zeros(n, dtype=np.int64)
        self._start_s = np.full(n, time.perf_counter())
        self._sink: list[tuple[int, float, int, float]] | None = None
        if recorded:
            self._sink = []
            for i, sub in enumerate(self.envs):
                recorder = sub
                while not isinstance(recorder, EnvEpisodes):
                    if not isinstance(recorder, gymnasium.Wrapper):
                        raise WrapperError(
                            "a wrapper replaced the env instead of wrapping it (its .env chain "
                            "does not reach the env gymnasium made): apply it as a "
                            "gymnasium.Wrapper"
                        )
                    recorder = recorder.env
                recorder.index, recorder.sink = i, self._sink
        # (seed, obs, infos) of the last reset with an int seed, until anything else is done
        # with the env (:meth:`reset`).
        self._last_reset: tuple[int, Any, dict[str, Any]] | None = None

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[Any, dict[str, Any]]:  # fmt: skip
        """SyncVectorEnv's reset; a reset with the int seed of the one just before it, nothing
        done with the env in between, returns a copy of that reset's result without resetting
        the sub-envs again.

        Why: gymnasium's contract makes a seeded reset reproducible, so the second would put
        every sub-env in the state the first left it in; ``make_vec`` resets each env it makes
        and the trainer resets again with the same seed, and an ALE reset with a seed reloads
        the ROM (~0.2 s an env on the slow box: 1.6 s of startup at CleanRL's 8 envs).
        """
        mask = None if options is None else options.get("reset_mask")
        last, self._last_reset = self._last_reset, None
        if last is not None and options is None and type(seed) is int and seed == last[0]:
            obs, infos = deepcopy(last[1]), deepcopy(last[2])
        else:
            obs, infos = super().reset(seed=seed, options=options)
        if options is None and type(seed) is int:
            self._last_reset = (seed, deepcopy(obs), deepcopy(infos))
        rows = slice(None) if mask is None else mask
        self._returns[rows], self._lengths[rows] = 0.0, 0
        self._start_s[rows] = time.perf_counter()
        if self._sink is not None and mask is None:
            self._sink.clear()  # the episodes a reset cut short are not episodes
        return obs, infos

    def step(self, actions: Any) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray, dict[str, Any]]:
        self._last_reset = None
        actions = self._check_actions(actions)
        rows = actions if self._rows_of is None else self._rows_of(actions)
        n, dense, batch, env_obs = self.num_envs, self._dense, self._observations, self._env_obs
        rewards = np.empty(n)
        terminations, truncations = np.empty(n, dtype=np.bool_), np.empty(n, dtype=np.bool_)
        returns, lengths, own = self._returns, self._lengths, self._sink is None
        infos: dict[str, Any] = {}
        add_info, ended, final_obs = self._add_info, None, batch
        # A loop over the sub-envs is gymnasium's own; the bookkeeping rides in it as Python
        # scalars, which at one env cost less than the numpy ops over the batch would.
        for i, (env, action) in enumerate(zip(self.envs, rows, strict=True)):
            obs, reward, terminated, truncated, info = env.step(action)
            rewards[i], terminations[i], truncations[i] = reward, terminated, truncated
            if own:
                # Summed in float64, as gymnasium's RecordEpisodeStatistics sums: the same bits.
                returns[i] += rewards[i]
                lengths[i] += 1
            if terminated or truncated:
                if ended is None:
                    ended = np.zeros(n, dtype=np.bool_)
                    if dense:
                        final_obs = np.zeros_like(batch)
                ended[i] = True
                if dense:
                    final_obs[i] = obs
                    infos = add_info(infos, {"final_info": info}, i)
                else:
                    infos = add_info(infos, {"final_obs": obs, "final_info": info}, i)
                obs, info = env.reset()
            env_obs[i] = obs  # SyncVectorEnv's reset(reset_mask) batches the rows it keeps
            if dense:
                batch[i] = obs
            if info:
                infos = add_info(infos, info, i)
        if ended is not None and dense:
            infos["final_obs"], infos["_final_obs"] = final_obs, ended.copy()
        if own and ended is not None:
            self._episodes_ended(ended, infos)
        elif not own and self._sink:
            self._episodes_recorded(infos)
        if dense:
            obs = batch.copy()
        else:
            self._observations = concatenate(self.single_observation_space, env_obs, batch)
            obs = deepcopy(self._observations)
        return obs, rewards, terminations, truncations, infos

    def call(self, name: str, *args: Any, **kwargs: Any) -> tuple[Any, ...]:
        self._last_reset = None  # a call may change a sub-env's state: the next reset resets
        return super().call(name, *args, **kwargs)

    def set_attr(self, name: str, values: list[Any] | tuple[Any, ...] | Any) -> None:
        self._last_reset = None
        super().set_attr(name, values)

    def _episodes_ended(self, ended: np.ndarray, infos: dict[str, Any]) -> None:
        """``infos["episode"]``/``["_episode"]`` for the episodes that ended this step (zeros
        elsewhere): ``r`` float64, ``l`` int64, ``t`` float64 seconds rounded to microseconds,
        as gymnasium's vector ``RecordEpisodeStatistics`` gives them; their rows restart."""
        now = time.perf_counter()
        episode = {
            "r": np.where(ended, self._returns, 0.0),
            "l": np.where(ended, self._lengths, 0),
            "t": np.where(ended, np.round(now - self._start_s, 6), 0.0),
        }
        self._returns[ended], self._lengths[ended], self._start_s[ended] = 0.0, 0, now
        self._put_episodes(infos, episode, ended)

    def _episodes_recorded(self, infos: dict[str, Any]) -> None:
        """The same entries from the episodes the sub-envs' :class:`EnvEpisodes` recorded."""
        n = self.num_envs
        episode = {"r": np.zeros(n), "l": np.zeros(n, dtype=np.int64), "t": np.zeros(n)}
        ended = np.zeros(n, dtype=np.bool_)
        for i, ret, steps, seconds in cast(list, self._sink):
            episode["r"][i], episode["l"][i], episode["t"][i], ended[i] = ret, steps, seconds, True
        cast(list, self._sink).clear()
        self._put_episodes(infos, episode, ended)

    @staticmethod
    def _put_episodes(infos: dict[str, Any], episode: dict[str, np.ndarray],
                      ended: np.ndarray) -> None:  # fmt: skip
        if "episode" in infos or "_episode" in infos:
            raise ValueError(
                "the env's infos already hold 'episode': a wrapper of yours records episode "
                "statistics; rlperf records them itself"
            )
        infos["episode"], infos["_episode"] = episode, ended


def _itself(env: gymnasium.Env) -> gymnasium.Env:
    return env


class InfoTypes:
    """The types gymnasium would give a ``gym:`` id's info entries across *all* workers, kept
    recoverable inside one worker.

    gymnasium's ``SyncVectorEnv`` gives an info entry the type of the first row that has it and
    casts later rows into it: FrozenLake's ``prob`` is an int after a reset, so a batch whose
    first row just reset truncates the other rows' 1/3 to 0. A worker's rows are only part of the
    batch, and which row comes first is only known where the parts meet (the parent). So in a
    worker the sub-env's ``_add_info`` keeps every value (an array is promoted when a later row
    needs a wider type) and :meth:`take` names the entries so promoted with the type their first
    row gave: the parent casts the combined entry to that type when this worker holds the
    batch's first such row (``workers/pool.py``), giving gymnasium's result exactly.
    """

    def __init__(self, env: VectorEnv) -> None:
        sync = env.unwrapped
        self._n = sync.num_envs
        self._first: dict[tuple[str, ...], np.dtype] = {}
        sync._add_info = self._add_info  # type: ignore[method-assign]  # instance attribute

    def take(self) -> dict[tuple[str, ...], np.dtype]:
        """The entries promoted since the last call: path of keys -> their first row's dtype."""
        first, self._first = self._first, {}
        return first

    def _add_info(self, vector_infos: dict[str, Any], env_info: dict[str, Any], env_num: int,
                  path: tuple[str, ...] = ()) -> dict[str, Any]:  # fmt: skip
        """gymnasium 1.4's ``VectorEnv._add_info``, promoting instead of casting (class doc)."""
        n = self._n
        for key, value in env_info.items():
            if key == "final_obs":
                array = vector_infos.get("final_obs")
                if array is None:
                    array = np.full(n, fill_value=None, dtype=object)
                array[env_num] = value
            elif isinstance(value, dict):
                array = self._add_info(vector_infos.get(key, {}), value, env_num, (*path, key))
            else:
                scalar = type(value) in (int, float, bool) or isinstance(value, np.number)
                array = vector_infos.get(key)
                if array is None:
                    if scalar:
                        array = np.zeros(n, dtype=type(value))
                    elif isinstance(value, np.ndarray):
                        array = np.zeros((n, *value.shape), dtype=value.dtype)
                    else:
                        array = np.full(n, fill_value=None, dtype=object)
                elif scalar and array.dtype != object:
                    wide = np.result_type(array.dtype, np.asarray(value).dtype)
                    if wide != array.dtype:
                        self._first.setdefault((*path, key), array.dtype)
                        array = array.astype(wide)
                array[env_num] = value
            mask = vector_infos.get(f"_{key}")
            if mask is None:
                mask = np.zeros(n, dtype=np.bool_)
            mask[env_num] = True
            vector_infos[key], vector_infos[f"_{key}"] = array, mask
        return vector_infos


def make_gym_vec(env_id: str, num_envs: int, **kwargs: Any) -> VectorEnv:
    """Wrap gymnasium id ``env_id`` in a synchronous vector env with SAME_STEP autoreset;
    ``kwargs`` go to ``gymnasium.make_vec``, ``wrappers`` (callables or their text,
    :func:`parse_wrappers`) applied inside each sub-env above the env's own episode statistics
    (module docstring).

    Raises:
        WrapperError: a wrapper that cannot be found, parsed or applied (one line).
    """
    wrappers = parse_wrappers(kwargs.pop(WRAPPERS_OPTION, None))
    if wrappers:
        wrappers = [EnvEpisodes, *wrappers]
    quiet_mujoco(env_id)
    sync = gymnasium.make_vec(
        env_id,
        num_envs=num_envs,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=cast(Any, wrappers) or None,  # gymnasium types them as returning a Wrapper
        **kwargs,
    )
    return GymVecEnv(cast(Any, sync).envs, recorded=bool(wrappers))


def quiet_mujoco(env_id: str) -> None:
    """Route MuJoCo's warnings into Python's, for an id whose env is MuJoCo's.

    MuJoCo's default warning handler prints each warning and appends it to MUJOCO_LOG.TXT in
    the current directory: gymnasium's v5 models trip a deprecation warning when they compile,
    so every env made (per sub-env, per worker) printed it again and left the file behind in
    the user's directory. As a Python warning it is shown once and can be filtered."""
    try:
        entry_point = str(gymnasium.spec(env_id).entry_point)
    except gymnasium.error.Error:  # an unknown id: make_vec says so
        return
    if "mujoco" not in entry_point:
        return
    import mujoco  # the id's env imports it anyway

    mujoco.set_mju_user_warning(_mujoco_warning)


# MuJoCo's warnings about gymnasium's own model files, which the user cannot act on: its v5
# models (half_cheetah.xml ...) set the compiler's settotalmass, which MuJoCo deprecates,
# so every run (and eval, once per env made) printed it. Matched by text: MuJoCo's other
# warnings still reach Python's.
GYMNASIUM_MODEL_WARNINGS = ("compiler attribute 'settotalmass' is deprecated",)


def _mujoco_warning(message: str) -> None:
    if any(known in message for known in GYMNASIUM_MODEL_WARNINGS):
        return
    warnings.warn(f"MuJoCo: {message}", RuntimeWarning, stacklevel=2)


class EnvEpisodes(gymnasium.Wrapper):
    """The first wrapper of each sub-env given ``wrappers``: its episodes' return, length and
    seconds as the env gymnasium made for the id has them, below every wrapper of the user's.

    An episode ends where this env terminates or truncates, or where a wrapper above resets it
    before then (an outer ``TimeLimit``: the episode it truncated). A wrapper that ends the
    agent's episode without resetting the env (a lost life in ``EpisodicLifeEnv``) leaves the
    episode running: returns are whole games, as CleanRL's ``RecordEpisodeStatistics``, placed
    first, reports them. Each ended episode goes to :attr:`sink` as ``(index, r, l, t)``, read
    by :class:`GymVecEnv` once per vector step; a side channel, so no wrapper between
    can drop or change it as it might an ``info`` entry.
    """

    def __init__(self, env: gymnasium.Env) -> None:
        super().__init__(env)
        self.sink: list[tuple[int, float, int, float]] = []
        self.index = 0
        self._return, self._length, self._start = 0.0, 0, time.perf_counter()

    def reset(self, **kwargs: Any) -> tuple[Any, dict[str, Any]]:
        if self._length:  # ended from above, without a termination or truncation of its own
            self._finish()
        obs, info = self.env.reset(**kwargs)
        self._return, self._length, self._start = 0.0, 0, time.perf_counter()
        return obs, info

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        obs, reward, terminated, truncated, info = self.env.step(action)
        # Summed in float64, as gymnasium's vector RecordEpisodeStatistics sums: the same bits.
        self._return += float(reward)
        self._length += 1
        if terminated or truncated:
            self._finish()
            self._return, self._length, self._start = 0.0, 0, time.perf_counter()
        return obs, reward, terminated, truncated, info

    def _finish(self) -> None:
        seconds = round(time.perf_counter() - self._start, 6)
        self.sink.append((self.index, self._return, self._length, seconds))


class WrapperSpec:
    """One wrapper given as text: ``spec(env)`` is ``cls(env, *args, **kwargs)``, and any error
    it raises is one line naming the wrapper (:class:`WrapperError`)."""

    def __init__(self, text: str, cls: Callable[..., Any], args: tuple[Any, ...],
                 kwargs: dict[str, Any]) -> None:  # fmt: skip
        self.text, self.cls, self.args, self.kwargs = text, cls, args, kwargs

    def __call__(self, env: gymnasium.Env) -> gymnasium.Env:
        try:
            return self.cls(env, *self.args, **self.kwargs)
        except Exception as e:  # a wrapper refusing the env or its arguments: one line
            text = str(e).strip().splitlines()
            raise WrapperError(
                f"wrapper {self.text!r} failed on {env.spec.id if env.spec else env}: "
                f"{type(e).__name__}{': ' + text[0] if text else ''}"
            ) from e

    def __repr__(self) -> str:
        return f"WrapperSpec({self.text!r})"


def parse_wrappers(value: Any) -> list[Callable[[gymnasium.Env], gymnasium.Env]]:
    """The per-env wrappers the ``wrappers`` option names, in the order they are applied.

    ``value``: None; a callable; text naming wrappers separated by commas; or a list of
    callables and such text (a config file's list). A wrapper in text is ``Name`` (in
    ``gymnasium.wrappers``), ``module:Name`` or ``package.module.Name`` (anywhere), each
    optionally with the arguments that follow the env, as Python literals:
    ``"FlattenObservation,ClipAction"``,
    ``"gymnasium.wrappers:TimeLimit(max_episode_steps=100)"``, ``"ClipReward(-1, 1)"``. A
    wrapper that takes a function (``TransformReward``) needs a callable, from Python.

    Raises:
        WrapperError: text that is not that form, a name that cannot be found, a vector
            wrapper, or an argument that is not a literal (one line, naming it).
    """
    if value is None:
        return []
    items = list(value) if isinstance(value, list | tuple) else [value]
    wrappers: list[Callable[[gymnasium.Env], gymnasium.Env]] = []
    for item in items:
        if isinstance(item, str):
            wrappers.extend(_parse_spec(text) for text in _split_specs(item))
        elif callable(item):
            wrappers.append(item)
        else:
            raise WrapperError(
                f"the {WRAPPERS_OPTION} option takes wrapper names (text) or callables, got "
                f"{type(item).__name__} {item!r}"
            )
    return wrappers


def _split_specs(text: str) -> list[str]:
    """``text`` split at the commas outside parentheses, brackets, braces and quotes."""
    parts, depth, quote, start = [], 0, "", 0
    for i, ch in enumerate(text):
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    specs = [p.strip() for p in parts]
    if not any(specs):
        return []
    for spec in specs:
        if not spec:
            raise WrapperError(f"{WRAPPERS_OPTION}={text!r} has an empty name between commas")
    return specs


def _parse_spec(text: str) -> WrapperSpec:
    """One wrapper's text (:func:`parse_wrappers`) as a :class:`WrapperSpec`."""
    form = "Name, Name(key=value, ...), module:Name(...) or package.module.Name(...)"
    match = _SPEC.fullmatch(text)
    if match is None:
        raise WrapperError(f"wrapper {text!r} is not of the form {form}")
    args: tuple[Any, ...] = ()
    kwargs: dict[str, Any] = {}
    if match["args"] is not None:
        try:
            call = ast.parse(f"f({match['args']})", mode="eval").body
        except SyntaxError as e:
            raise WrapperError(f"wrapper {text!r}: its arguments do not parse ({e.msg})") from e
        assert isinstance(call, ast.Call)
        try:
            args = tuple(ast.literal_eval(a) for a in call.args)
            for kw in call.keywords:
                if kw.arg is None:
                    raise ValueError("**")
                kwargs[kw.arg] = ast.literal_eval(kw.value)
        except ValueError as e:
            raise WrapperError(
                f"wrapper {text!r}: arguments must be Python literals (numbers, strings, "
                "True/False/None, tuples, lists, dicts), as in TimeLimit(max_episode_steps=100)"
            ) from e
    return WrapperSpec(text, _resolve(match["target"], text), args, kwargs)


def _resolve(target: str, text: str) -> Callable[..., Any]:
    """The wrapper ``target`` names: ``Name`` in gymnasium.wrappers, ``module:Name`` or
    ``package.module.Name``."""
    if ":" in target:
        module_name, _, attr = target.partition(":")
    elif "." in target:
        module_name, _, attr = target.rpartition(".")
    else:
        module_name, attr = "gymnasium.wrappers", target
    try:
        module = importlib.import_module(module_name)
    except Exception as e:  # not installed, or its import raised: one line naming it
        raise WrapperError(
            f"wrapper {text!r}: cannot import module {module_name!r} "
            f"({type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''})"
        ) from e
    found: Any = module
    for part in attr.split("."):
        found = getattr(found, part, None)
        if found is None:
            names = getattr(module, "__all__", None) or [n for n in dir(module) if n[:1] != "_"]
            close = difflib.get_close_matches(attr, names, n=1, cutoff=0.6)
            hint = f": did you mean {close[0]}?" if close else ""
            where = (" (give module:Name for a wrapper outside gymnasium.wrappers)"
                     if target == attr else "")  # fmt: skip
            raise WrapperError(f"unknown wrapper {attr!r} in {module_name}{hint}{where}")
    if isinstance(found, type) and issubclass(found, VectorWrapper | VectorEnv):
        raise WrapperError(
            f"wrapper {text!r} is a vector wrapper; the {WRAPPERS_OPTION} option takes wrappers of "
            "one env (gymnasium.wrappers, not gymnasium.wrappers.vector), applied to each sub-env"
        )
    if not callable(found):
        raise WrapperError(f"wrapper {text!r} names {type(found).__name__}, not a wrapper")
    return cast(Callable[..., Any], found)
