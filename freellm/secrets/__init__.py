"""Secrets the gateway keeps itself: the master key and the provider keys stored encrypted under it.

``master`` finds (or generates) the master key; ``vault`` encrypts provider keys added at run time into
one store setting. Neither imports ``cryptography`` until a key is actually encrypted or decrypted.
"""

from freellm.secrets.master import (
    MASTER_KEY_BYTES,
    MASTER_KEY_ENV,
    MASTER_KEY_FILENAME,
    MasterKeyError,
    load_master_key,
    master_key_from_env,
    parse_master_key,
    write_master_key,
)
from freellm.secrets.vault import (
    MAX_KEY_CHARS,
    SETTING_NAME,
    VAULT_FORMAT_VERSION,
    KeyVault,
    StoredKey,
    VaultError,
    key_id,
    mask,
    validate_key_text,
)

__all__ = [
    "MASTER_KEY_BYTES",
    "MASTER_KEY_ENV",
    "MASTER_KEY_FILENAME",
    "MAX_KEY_CHARS",
    "SETTING_NAME",
    "VAULT_FORMAT_VERSION",
    "KeyVault",
    "MasterKeyError",
    "StoredKey",
    "VaultError",
    "key_id",
    "load_master_key",
    "mask",
    "master_key_from_env",
    "parse_master_key",
    "validate_key_text",
    "write_master_key",
]
