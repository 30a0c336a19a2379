"""The SSL context of a client over SSL or SASL_SSL, from kafka-python's ``ssl_*`` options.

``ssl_context`` (an :class:`ssl.SSLContext`) is used as it is; otherwise one is made:
TLS 1.2 and up, the broker's certificate verified against ``ssl_cafile`` (PEM; the
system's CAs when not given) and its host name checked unless ``ssl_check_hostname`` is
False; ``ssl_certfile`` and ``ssl_keyfile`` (PEM; ``ssl_password`` for an encrypted key)
are the certificate the client shows a broker that asks for one (``ssl.client.auth``).
A file that cannot be read or a key that does not fit is a ConfigError naming the option.
"""

from __future__ import annotations

import ssl
from typing import Optional

from ..errors import ConfigError

__all__ = ["client_ssl_context"]


def client_ssl_context(ssl_context: Optional[ssl.SSLContext] = None, ssl_cafile: Optional[str] = None,
                       ssl_certfile: Optional[str] = None, ssl_keyfile: Optional[str] = None,
                       ssl_password: Optional[str] = None, ssl_check_hostname: bool = True) -> ssl.SSLContext:
    """The context a client's connections handshake with (see the module docstring)."""
    if ssl_context is not None:
        if not isinstance(ssl_context, ssl.SSLContext):
            raise ConfigError("ssl_context must be an ssl.SSLContext, not %r" % (ssl_context,))
        return ssl_context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = bool(ssl_check_hostname)
    if ssl_cafile is not None:
        try:
            context.load_verify_locations(cafile=ssl_cafile)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError("ssl_cafile %r: %s" % (ssl_cafile, getattr(exc, "strerror", None) or exc)) from None
    else:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if ssl_keyfile is not None and ssl_certfile is None:
        raise ConfigError("ssl_keyfile is given without ssl_certfile")
    if ssl_certfile is not None:
        try:
            context.load_cert_chain(ssl_certfile, ssl_keyfile, ssl_password)
        except OSError as exc:  # ssl.SSLError is one: a wrong password, a key that does not match
            which = "ssl_certfile %r / ssl_keyfile %r" % (ssl_certfile, ssl_keyfile)
            if ssl_password is not None:
                which += " (or ssl_password, if the key's password is not it)"
            raise ConfigError("%s: %s" % (which, getattr(exc, "strerror", None) or exc)) from None
    return context
