"""Logging set-up for the two programs: the ``luigi`` client and the ``luigid`` server.

Each tries its sources in order (command-line options, an ini file for ``logging.config.fileConfig``, the
TOML ``[logging]`` table for ``dictConfig``, then a default) and stops at the first that applies. It runs
at most once per process, and not at all with ``[core] no_configure_logging = true``.
"""

from __future__ import annotations

import logging
import os
from typing import Any, ClassVar

from luigi import configuration

__all__ = ["BaseLogging", "DaemonLogging", "InterfaceLogging"]


class _DefaultOpts:
    """Options used when ``setup()`` is called without any (no CLI flags given)."""

    background = None
    logdir = None
    logging_conf_file = None
    log_level = "DEBUG"


class _ActiveConfig:
    """``BaseLogging.config`` until something is assigned there: the configuration active when read
    (Luigi binds it once at import; a test that swaps the configuration afterwards is seen here)."""

    def __get__(self, instance: object, owner: type | None = None) -> Any:
        return configuration.get_config()


class BaseLogging:
    """The shared sequence; subclasses say what their CLI options, ini file and default mean.

    Hooks users' tests patch: ``config`` (assign a parser, or a plain dict for ``_section``) and each
    subclass's own ``_configured`` flag (False lets ``setup`` run again, True keeps it from running).
    """

    config: ClassVar[Any] = _ActiveConfig()
    _configured: ClassVar[bool] = False

    @classmethod
    def setup(cls, opts: Any = _DefaultOpts) -> bool:
        """Configure logging from the first source that applies; True when something was configured."""
        logger = logging.getLogger("luigi")
        if cls._configured:
            logger.info("logging already configured")
            return False
        cls._configured = True
        if cls._get_config().getboolean("core", "no_configure_logging", False):
            logger.info("logging disabled in settings")
            return False
        for source, how in ((cls._cli, "special settings"), (cls._conf, "*.conf file")):
            if source(opts):
                logger.info("logging configured via %s", how)
                return True
        if cls._section(opts):
            logger.info("logging configured via config section")
            return True
        configured = cls._default(opts)
        if configured:
            logger.info("logging configured by default settings")
        return configured

    @classmethod
    def _get_config(cls) -> Any:
        return cls.config if cls.config is not None else configuration.get_config()

    @classmethod
    def _section(cls, opts: Any) -> bool:
        """Apply the TOML ``[logging]`` table (or a plain dict's ``"logging"``) with ``dictConfig``; cfg
        files have no such table."""
        config = cls._get_config()
        if isinstance(config, configuration.LuigiConfigParser) or "logging" not in config:
            return False
        import logging.config  # here and below: most runs configure logging without it

        logging.config.dictConfig(_thawed(config["logging"]))
        return True

    @classmethod
    def _cli(cls, opts: Any) -> bool:
        raise NotImplementedError

    @classmethod
    def _conf(cls, opts: Any) -> bool:
        raise NotImplementedError

    @classmethod
    def _default(cls, opts: Any) -> bool:
        raise NotImplementedError


class DaemonLogging(BaseLogging):
    """``luigid``: INFO on the root logger in the background, a log file with ``--logdir``, else stderr."""

    _configured: ClassVar[bool] = False
    _log_format = "%(asctime)s %(name)s[%(process)s] %(levelname)s: %(message)s"

    @classmethod
    def _cli(cls, opts: Any) -> bool:
        if getattr(opts, "background", None):
            logging.getLogger().setLevel(logging.INFO)  # the daemon set up its own rotating handler
            return True
        logdir = getattr(opts, "logdir", None)
        if logdir:
            # An explicit handler rather than basicConfig, which does nothing once the root has handlers.
            handler = logging.FileHandler(os.path.join(logdir, "luigi-server.log"))
            handler.setFormatter(logging.Formatter(cls._log_format))
            root = logging.getLogger()
            root.addHandler(handler)
            root.setLevel(logging.INFO)
            return True
        return False

    @classmethod
    def _conf(cls, opts: Any) -> bool:
        # fileConfig's default disables the loggers that exist and the file does not name, as Luigi's luigid
        # does (luigi.server among them); the client keeps them.
        return _file_config(
            cls._get_config().get("core", "logging_conf_file", None), "[core] logging_conf_file"
        )

    @classmethod
    def _default(cls, opts: Any) -> bool:
        logging.basicConfig(level=logging.INFO, format=cls._log_format)
        return True


class InterfaceLogging(BaseLogging):
    """The ``luigi`` client: ``--logging-conf-file``, else ``[logging]``, else stderr at ``--log-level``."""

    _configured: ClassVar[bool] = False

    @classmethod
    def _cli(cls, opts: Any) -> bool:
        return False

    @classmethod
    def _conf(cls, opts: Any) -> bool:
        return _file_config(
            getattr(opts, "logging_conf_file", None), "--logging-conf-file", disable_existing_loggers=False
        )

    @classmethod
    def _default(cls, opts: Any) -> bool:
        level_name = str(getattr(opts, "log_level", None) or "DEBUG").upper()
        level = logging.getLevelName(level_name)
        if not isinstance(level, int):
            level = logging.DEBUG
        handler = logging.StreamHandler()
        handler.setLevel(level)
        handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
        logger = logging.getLogger("luigi-interface")
        logger.setLevel(level)
        logger.addHandler(handler)
        return True


def _file_config(path: str | None, origin: str, **options: Any) -> bool:
    """Apply an ini logging file (``logging.config.fileConfig(path, **options)``); a missing file is a
    clear error."""
    if not path:
        return False
    if not os.path.exists(path):
        raise OSError(f"Error: Unable to locate specified logging configuration file! ({path!r}, {origin})")
    import logging.config

    logging.config.fileConfig(path, **options)
    return True


def _thawed(value: Any) -> Any:
    """Plain dicts and lists, as ``dictConfig`` requires (TOML values may be read-only mappings)."""
    if hasattr(value, "items"):
        return {key: _thawed(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_thawed(item) for item in value]
    return value
