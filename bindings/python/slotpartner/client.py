"""``Client``: calls the service's action address (``getGames`` and any other action)."""

from __future__ import annotations

import ctypes
import json
import math
from dataclasses import dataclass, field
from typing import Any

from . import _lib
from ._guard import GuardedHandle
from .errors import ServiceError, argument_error, bytes_like, check_int, encoded, last_error
from .replies import c_text

_LIB = _lib.lib
_MEMORY = _lib.MEMORY


@dataclass(frozen=True, slots=True)
class Game:
    """One game of ``getGames`` (spec 2.1), copied out of the library's answer.

    ``rules`` and ``categories`` are native values: each element decoded from its JSON when
    first read (dicts, strings, numbers: the spec does not show their type), kept as the raw JSON
    text the service sent in ``rules_json`` and ``categories_json``; ``categories`` is None when
    the service sent ``null``. ``extra`` maps the fields the spec does not define to their raw
    JSON.
    """

    game_id: int
    name: str
    rules_json: list[str]
    game_type: str
    min_players: int
    max_players: int
    supports_tournament: bool
    categories_json: list[str] | None
    image_square: str
    image_background: str
    image_logo: str
    description_short: str
    description_long: str
    extra: dict[str, str] = field(default_factory=dict)
    _decoded: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    @property
    def rules(self) -> list[Any]:
        """The rules, each decoded from ``rules_json`` (once, on first read)."""
        decoded = self._decoded.get("rules")
        if decoded is None:
            decoded = self._decoded["rules"] = [json.loads(rule) for rule in self.rules_json]
        return decoded

    @property
    def categories(self) -> list[Any] | None:
        """The categories, each decoded from ``categories_json`` (once, on first read); None when
        the service sent ``null``."""
        if self.categories_json is None:
            return None
        decoded = self._decoded.get("categories")
        if decoded is None:
            decoded = self._decoded["categories"] = [json.loads(item) for item in self.categories_json]
        return decoded


def _read_games(ptr: int) -> list[Game]:
    """Copies an ``sp_games`` into Game objects (the caller frees it afterwards)."""
    memory = _MEMORY
    games_p, count = _lib.GAMES.unpack(memory[ptr : ptr + _lib.GAMES.size])
    if not count:
        return []
    text = _lib.read_str
    games = []
    for (
        game_id, name_p, name_n, rules_p, rules_n, type_p, type_n, min_players, max_players,
        supports_tournament, has_categories, categories_p, categories_n,
        square_p, square_n, background_p, background_n, logo_p, logo_n,
        short_p, short_n, long_p, long_n, extra_p, extra_n,
    ) in _lib.GAME.iter_unpack(memory[games_p : games_p + count * _lib.GAME.size]):  # fmt: skip
        games.append(
            Game(
                game_id=game_id,
                name=text(name_p, name_n),
                rules_json=_lib.read_str_array(rules_p, rules_n),
                game_type=text(type_p, type_n),
                min_players=min_players,
                max_players=max_players,
                supports_tournament=supports_tournament,
                categories_json=_lib.read_str_array(categories_p, categories_n) if has_categories else None,
                image_square=text(square_p, square_n),
                image_background=text(background_p, background_n),
                image_logo=text(logo_p, logo_n),
                description_short=text(short_p, short_n),
                description_long=text(long_p, long_n),
                extra=_lib.read_fields(extra_p, extra_n),
            )
        )
    return games


#: The library's retry defaults (``sp_client_config_new``): used for the one of ``retries`` and
#: ``retry_backoff`` left None when the other is given, since one C setter takes both.
DEFAULT_RETRIES = 2
DEFAULT_RETRY_BACKOFF_MS = 200


def _milliseconds(seconds: float, name: str) -> int:
    if not (isinstance(seconds, (int, float)) and math.isfinite(seconds) and seconds > 0):
        raise argument_error(name, f"expected a positive number of seconds, got {seconds!r}")
    return max(1, round(seconds * 1000))


class Client(GuardedHandle):
    """A client of the service's action address, safe to share between threads.

    The library's client is thread-safe and keeps connections alive between calls: create one
    and use it from every thread. ``close()`` (or leaving a ``with`` block) waits for calls in
    progress on other threads, then frees it; later calls raise ConfigurationError.

    Every setting after ``token`` is optional: None (the default) keeps the library's default,
    shown in brackets. The environment (``HTTPS_PROXY``, ``SSL_CERT_FILE``...) is never read.

    Args:
        base_url: the service's base URL (``https://`` only; the token must not travel in clear).
        token: the partner token (a UUID), sent as ``X-Service-Token``.
        ca_file: a PEM file of CA certificates to trust as well [none].
        ca_pem: PEM text (str or bytes) of CA certificates to trust as well [none].
        connect_timeout: seconds allowed to open a connection, TCP and TLS [5.0].
        timeout: seconds allowed for a whole call, answer included [15.0].
        retries: how often ``getGames`` and a ``Recovery``'s fetches are tried again (0 to 10)
            after a connection failure, a time-out or a 5xx answer [2]; ``call`` is never
            retried.
        retry_backoff: the first wait before a retry in seconds, doubling each time; 0 for none
            [0.2].
        trust_roots: ``"bundled"`` (Mozilla's roots, in the library), ``"system"`` (the OS store)
            or ``"extra-only"`` (only ``ca_file``/``ca_pem``) [``"bundled"``].
        proxy: ``http://host:port`` or ``socks5://host:port``, optional ``user:password@``
            [a direct connection].
        max_response_bytes: the largest answer accepted, at least 1024 [8 MiB].
        lenient_games: give a game missing a field that field's empty value instead of failing
            the call [False].
        fetch_action, fetch_index_param, fetch_event_key: how ``Recovery`` fetches a lost event
            again (keyword only). The spec says a lost event "can be obtained later through the
            partner-to-service interface by giving the id of the lost event" but shows neither
            the operation, nor its parameter, nor its answer, so all three are assumptions: the
            request is ``{"action": fetch_action, fetch_index_param: <index>}`` and the answer
            holds the event under ``fetch_event_key`` (``""``: the answer is the event itself).
            [``"getEvent"``, ``"index"`` and ``"event"``: ``{"action":"getEvent","index":42}``
            answered ``{"event":{...}}``, as the sandbox serves it.] A fetch is retried like
            ``getGames``; a 404 answer means the service knows no such event.

    Raises ConfigurationError for an unusable setting (``field`` names it).
    """

    _free = _LIB.sp_client_free
    _noun = "client"

    def __init__(
        self,
        base_url: str,
        token: str,
        ca_file: str | None = None,
        ca_pem: str | bytes | None = None,
        connect_timeout: float | None = None,
        timeout: float | None = None,
        retries: int | None = None,
        retry_backoff: float | None = None,
        trust_roots: str | None = None,
        proxy: str | None = None,
        max_response_bytes: int | None = None,
        lenient_games: bool | None = None,
        *,
        fetch_action: str | None = None,
        fetch_index_param: str | None = None,
        fetch_event_key: str | None = None,
    ) -> None:
        self._init_guard()
        roots = None
        if trust_roots is not None:
            roots = _lib.TRUST_ROOTS.get(trust_roots)
            if roots is None:
                raise argument_error(
                    "trust_roots", f"expected one of {', '.join(_lib.TRUST_ROOTS)}, got {trust_roots!r}"
                )
        if retries is not None and not 0 <= check_int(retries, "retries") < 2**32:
            raise argument_error("retries", f"expected 0 to 10, got {retries}")
        if max_response_bytes is not None and not 0 <= check_int(max_response_bytes, "max_response_bytes") < 2**64:
            raise argument_error("max_response_bytes", f"expected a positive integer, got {max_response_bytes}")
        backoff_ms = None
        if retry_backoff is not None:
            backoff_ms = 0 if retry_backoff == 0 else _milliseconds(retry_backoff, "retry_backoff")
        if ca_pem is None:
            pem = None
        elif isinstance(ca_pem, str):
            pem = encoded(ca_pem, "ca_pem")
        else:
            pem = bytes_like(ca_pem, "ca_pem", "a str or bytes")
        lib = _LIB
        # (setter, arguments) for each setting given; None keeps the library's default.
        steps: list[tuple[Any, tuple[Any, ...]]] = []
        if connect_timeout is not None:
            steps.append(
                (lib.sp_client_config_set_connect_timeout_ms, (_milliseconds(connect_timeout, "connect_timeout"),))
            )
        if timeout is not None:
            steps.append((lib.sp_client_config_set_timeout_ms, (_milliseconds(timeout, "timeout"),)))
        if retries is not None or backoff_ms is not None:
            # One C setter takes both: the one not given keeps its default.
            steps.append((
                lib.sp_client_config_set_retries,
                (
                    DEFAULT_RETRIES if retries is None else retries,
                    DEFAULT_RETRY_BACKOFF_MS if backoff_ms is None else backoff_ms,
                ),
            ))  # fmt: skip
        if roots is not None:
            steps.append((lib.sp_client_config_set_trust_roots, (roots,)))
        if max_response_bytes is not None:
            steps.append((lib.sp_client_config_set_max_response_bytes, (max_response_bytes,)))
        if lenient_games is not None:
            steps.append((lib.sp_client_config_set_lenient_games, (lenient_games,)))
        for setter, value, name in (
            (lib.sp_client_config_set_fetch_action, fetch_action, "fetch_action"),
            (lib.sp_client_config_set_fetch_index_param, fetch_index_param, "fetch_index_param"),
            (lib.sp_client_config_set_fetch_event_key, fetch_event_key, "fetch_event_key"),
            (lib.sp_client_config_add_ca_file, ca_file, "ca_file"),
            (lib.sp_client_config_set_proxy, proxy, "proxy"),
        ):
            if value is not None:
                steps.append((setter, (c_text(value, name),)))
        if pem is not None:
            steps.append((lib.sp_client_config_add_ca_pem, (pem, len(pem))))
        config = ctypes.c_void_p()
        status = lib.sp_client_config_new(c_text(base_url, "base_url"), c_text(token, "token"), ctypes.byref(config))
        if status:
            raise last_error(status)
        try:
            for setter, args in steps:
                status = setter(config, *args)
                if status:
                    raise last_error(status)
            client = ctypes.c_void_p()
            status = lib.sp_client_new(config, ctypes.byref(client))
            if status:
                raise last_error(status)
        finally:
            lib.sp_client_config_free(config)
        self._ptr = client.value

    def get_games(self, locale: str, game_id: int | None = None) -> list[Game]:
        """``getGames`` in ``locale`` (``"en-US"``; ``"en_US"`` is sent as ``"en-US"``) for one game
        or, with ``game_id`` None, all of them. Blocks (without holding the GIL) for up to the
        time-out times the tries.

        Raises ServiceError (an HTTP status other than 200, its status in the message; a bad
        answer, the field named), TransportError (connect, time-out, TLS, answer too large) or
        ConfigurationError (a locale that is not one).
        """
        if game_id is not None and not 0 <= check_int(game_id, "game_id") < 2**63:
            raise argument_error("game_id", f"expected a non-negative integer, got {game_id}")
        locale_c = c_text(locale, "locale")
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_client_get_games, locale_c, -1 if game_id is None else game_id, ctypes.byref(out))
        try:
            assert out.value
            return _read_games(out.value)
        finally:
            _LIB.sp_games_free(out.value)

    def call(self, action: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        """Calls any ``action`` with ``params`` (sent as ``{"action": action, **params}``) and returns
        the decoded answer object. Not retried: an action may not be safe to repeat. Raises like
        ``get_games``; ServiceError (SP_ERR_BAD_RESPONSE) when the answer is not a JSON object.
        """
        action_c = c_text(action, "action")
        try:
            body = json.dumps(params, ensure_ascii=False, allow_nan=False).encode() if params is not None else None
        except (TypeError, ValueError) as error:
            raise argument_error("params", f"cannot be sent as JSON ({error})") from error
        out = ctypes.c_void_p()
        self._invoke(_LIB.sp_client_call, action_c, body, len(body) if body else 0, ctypes.byref(out))
        try:
            assert out.value
            ptr, length = _lib.STR.unpack(_MEMORY[out.value : out.value + _lib.STR.size])
            text = _lib.read_str(ptr, length)
        finally:
            _LIB.sp_buffer_free(out.value)
        answer = json.loads(text)
        if not isinstance(answer, dict):
            raise ServiceError(_lib.SP_ERR_BAD_RESPONSE, action, f"{action}: the response is not a JSON object")
        return answer


__all__ = ["Client", "Game"]
