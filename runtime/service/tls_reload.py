"""A renewed TLS certificate served without a restart.

Certificates are renewed every 60-90 days (Let's Encrypt, cert-manager) into the same files. On
a reload (``SIGHUP``, ``rlsched reload``) the service reads ``tls_certfile`` and ``tls_keyfile``
again; when they changed, it checks the new pair as a start would and loads it into the running
server's SSL context: new connections get the new certificate, open ones keep theirs. A pair that
does not load refuses the whole reload (nothing changes; the old certificate stays served).
"""

from __future__ import annotations

import hashlib
import ssl
from collections.abc import Callable
from pathlib import Path

from runtime.service.preflight import check_tls


class CertificateReloader:
    """Loads the certificate again when its files changed.

    :param certfile: the served certificate (chain), PEM.
    :param keyfile: its private key, PEM.
    :param context: the running server's SSL context (``None`` until it serves).
    :param where: the config file, named in errors.
    """

    def __init__(
        self, certfile: str, keyfile: str, context: Callable[[], ssl.SSLContext | None], where: str
    ) -> None:
        self.certfile, self.keyfile, self.context, self.where = certfile, keyfile, context, where
        self.digest = self._digest()

    def _digest(self) -> str:
        h = hashlib.sha256()
        for path in (self.certfile, self.keyfile):
            try:
                h.update(Path(path).read_bytes())
            except OSError:
                h.update(b"unreadable")  # check_tls below says which file and why
        return h.hexdigest()

    def __call__(self, load: bool = True) -> str | None:
        """Load the files if they changed; what changed, for the reload's answer (``None``: they
        did not).

        :param load: ``False``: only check the new pair (a dry run).
        :raises InputError: the new pair does not load (the old certificate stays served).
        """
        digest = self._digest()
        if digest == self.digest:
            return None
        check_tls(self.certfile, self.keyfile, self.where)
        if not load:
            return f"tls certificate reloaded from {self.certfile}"
        ctx = self.context()
        if ctx is None:
            return None
        ctx.load_cert_chain(self.certfile, self.keyfile)
        self.digest = digest
        return f"tls certificate reloaded from {self.certfile}"
