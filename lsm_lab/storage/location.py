"""Where a table lives: a path or URI, plus options, becomes a `Storage`.

    /data/trips, ./trips, file:///data/trips        → LocalStorage
    s3://bucket/prefix  (s3a://)                     → ObjectStorage over S3 or an S3-compatible store
    gs://bucket/prefix  (gcs://)                     → ObjectStorage over Google Cloud Storage
    az://container/prefix (abfs://, abfss://, azure://) → ObjectStorage over Azure Blob Storage

Credentials and endpoints follow the convention of hudi-rs, delta-rs and
obstore: the standard environment variables first (`AWS_ACCESS_KEY_ID`,
`AWS_SECRET_ACCESS_KEY`, `AWS_SESSION_TOKEN`, `AWS_REGION`, `AWS_ENDPOINT_URL`,
`AWS_ALLOW_HTTP=true` for a plain-http endpoint; `GOOGLE_SERVICE_ACCOUNT`;
`AZURE_STORAGE_ACCOUNT_NAME`, `AZURE_STORAGE_ACCOUNT_KEY`), then a
`storage_options={...}` mapping whose keys override them.  Option keys are
case-insensitive and may carry the store's prefix (`aws_region` = `region`).

Requests are bounded: `timeout` (default 30 s per request), `connect_timeout`
(5 s), `max_retries` (3) and `retry_timeout` (15 s) can be set as options.
An endpoint that does not answer ends in a `StorageError` within that bound.

Simplified compared with Apache Hudi: Hudi takes storage settings from Hadoop
configuration (`fs.s3a.*`); lsm_lab takes the object_store keys instead.

Taught in: notebooks/12_object_storage.ipynb
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from lsm_lab.errors import InputError
from lsm_lab.storage.base import NO_CREDENTIALS, RequestCounts, Storage, StorageError
from lsm_lab.storage.local import LocalStorage

SCHEMES = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs",
           "az": "azure", "abfs": "azure", "abfss": "azure", "azure": "azure"}

_CLIENT_KEYS = {"allow_http", "timeout", "connect_timeout", "allow_invalid_certificates", "proxy_url", "user_agent"}
_RETRY_KEYS = {"max_retries", "retry_timeout"}
_PREFIX = {"s3": "aws_", "gcs": "google_", "azure": "azure_"}
_ALIASES = {"endpoint_url": "endpoint", "access_key": "access_key_id", "secret_key": "secret_access_key",
            "storage_account_name": "account_name", "storage_account_key": "account_key"}
_ENV = {
    "s3": {"AWS_ACCESS_KEY_ID": "access_key_id", "AWS_SECRET_ACCESS_KEY": "secret_access_key",
           "AWS_SESSION_TOKEN": "session_token", "AWS_DEFAULT_REGION": "region", "AWS_REGION": "region",
           "AWS_ENDPOINT_URL": "endpoint", "AWS_ENDPOINT_URL_S3": "endpoint", "AWS_ALLOW_HTTP": "allow_http",
           "AWS_EC2_METADATA_DISABLED": "ec2_metadata_disabled"},
    "gcs": {"GOOGLE_SERVICE_ACCOUNT": "service_account", "GOOGLE_APPLICATION_CREDENTIALS": "application_credentials",
            "GOOGLE_SERVICE_ACCOUNT_KEY": "service_account_key"},
    "azure": {"AZURE_STORAGE_ACCOUNT_NAME": "account_name", "AZURE_STORAGE_ACCOUNT_KEY": "account_key",
              "AZURE_STORAGE_SAS_TOKEN": "sas_token", "AZURE_STORAGE_USE_EMULATOR": "use_emulator",
              "AZURE_ENDPOINT": "endpoint", "AZURE_STORAGE_ENDPOINT": "endpoint", "AZURE_ALLOW_HTTP": "allow_http"},
}


def is_remote(location: str | os.PathLike[str]) -> bool:
    """True for an object-store URI (`s3://`, `gs://`, `az://`, ...)."""
    return isinstance(location, str) and urlsplit(location).scheme.lower() in SCHEMES


def _truthy(value: Any) -> bool:
    return str(value).strip().lower() in ("1", "true", "yes", "on")


_defaults: dict[str, Any] = {}


@contextlib.contextmanager
def default_options(options: Mapping[str, Any]) -> Iterator[None]:
    """Within the block, `options` apply to every location opened without them overriding
    (the CLI's `--storage-option KEY=VALUE`): environment, then these, then `storage_options`."""
    saved = dict(_defaults)
    _defaults.update(options)
    try:
        yield
    finally:
        _defaults.clear()
        _defaults.update(saved)


def resolve_options(kind: str, storage_options: Mapping[str, Any] | None) -> dict[str, Any]:
    """Environment variables, then `storage_options`, as canonical lower-case keys without store prefix."""
    out: dict[str, Any] = {}
    for var, key in _ENV[kind].items():  # later variables win: AWS_REGION over AWS_DEFAULT_REGION
        if os.environ.get(var):
            out[key] = os.environ[var]
    for raw, value in [*_defaults.items(), *(storage_options or {}).items()]:
        key = str(raw).lower()
        for prefix in _PREFIX.values():
            if key.startswith(prefix):
                key = key[len(prefix):]
        out[_ALIASES.get(key, key)] = value
    return out


def _seconds(value: Any, default: float) -> float:
    if value is None:
        return default
    text = str(value).strip().lower()
    try:
        return float(text[:-1]) if text.endswith("s") else float(text)
    except ValueError:
        raise StorageError(f"option value {value!r} is not a duration in seconds (e.g. 10 or '10s')") from None


def check_options(storage_options: Any) -> None:
    """`storage_options` is None or a mapping (an `InputError` otherwise)."""
    if storage_options is not None and not isinstance(storage_options, Mapping):
        raise InputError(f"storage_options must be a mapping of option names to values (or None), "
                         f"not {storage_options!r}")


def check_local_options(location: Any, storage_options: Any) -> None:
    """A local path takes no `storage_options`: they name an object store's client settings (endpoint,
    credentials, timeouts), so any given for a folder are a mistake (a wrong path?), never silently dropped."""
    check_options(storage_options)
    if storage_options:
        raise InputError(f"storage_options apply to object-store URIs (s3://, gs://, az://), not to the local path "
                         f"{os.fspath(location)!r}; leave them out, or check the path "
                         f"(got {sorted(map(str, storage_options))})")


def open_storage(location: str | os.PathLike[str], storage_options: Mapping[str, Any] | None = None,
                 *, counts: RequestCounts | None = None) -> Storage:
    """The `Storage` for a table location (see the module docstring for what is accepted)."""
    if location is None or not isinstance(location, (str, os.PathLike)):
        raise StorageError(f"a table location must be a path or a URI, not {type(location).__name__}")
    text = os.fspath(location)
    if not isinstance(text, str) or not text:
        raise StorageError("a table location must be a non-empty path or URI")
    split = urlsplit(text)
    scheme = split.scheme.lower()
    if scheme == "file" or not scheme or len(scheme) == 1:  # a plain path (a drive letter is not a scheme)
        check_local_options(text, storage_options)
    if scheme == "file":
        if split.netloc not in ("", "localhost"):  # file://relative/x is host "relative", path "/x": not ./relative/x
            raise InputError(f"a file:// URI names a host ({split.netloc!r}); write file:///absolute/path "
                             "(three slashes) or a plain path", path=text)
        return LocalStorage(Path(split.path), counts=counts)
    if not scheme or len(scheme) == 1:
        return LocalStorage(text, counts=counts)
    kind = SCHEMES.get(scheme)
    if kind is None:
        raise StorageError(f"unknown storage scheme {scheme!r} (use a local path, file://, s3://, gs:// or az://)",
                           path=text)
    check_options(storage_options)
    bucket = split.netloc
    if not bucket:
        raise StorageError("the URI names no bucket/container", path=text)
    resolved = resolve_options(kind, storage_options)
    storage = _object_storage(text, kind, bucket, split.path.strip("/"), dict(resolved), counts)
    storage.reopen = (open_storage, (text, resolved))  # type: ignore[attr-defined]  # how a pickled copy reopens it
    return storage


def _object_storage(uri: str, kind: str, bucket: str, prefix: str, opts: Any,
                    counts: RequestCounts | None) -> Storage:
    try:
        from obstore.store import AzureStore, GCSStore, S3Store
    except ImportError:  # pragma: no cover - obstore is a core dependency
        raise StorageError("object storage needs the `obstore` package (pip install obstore)", path=uri) from None
    from lsm_lab.storage.objectstore import ObjectStorage  # loads obstore: only for object-store URIs (start-up time)

    timeout = _seconds(opts.pop("timeout", None), 30.0)
    connect_timeout = _seconds(opts.pop("connect_timeout", None), 5.0)
    max_retries = int(opts.pop("max_retries", 3))
    retry_timeout = _seconds(opts.pop("retry_timeout", None), 15.0)
    client: Any = {"timeout": timedelta(seconds=timeout), "connect_timeout": timedelta(seconds=connect_timeout)}
    for key in list(opts):
        if key in _CLIENT_KEYS:
            value = opts.pop(key)
            client[key] = _truthy(value) if key in ("allow_http", "allow_invalid_certificates") else value
    retry: Any = {"max_retries": max_retries, "retry_timeout": timedelta(seconds=retry_timeout),
             "backoff": {"init_backoff": timedelta(milliseconds=100), "max_backoff": timedelta(seconds=2), "base": 2}}
    endpoint = opts.get("endpoint")
    if endpoint and str(endpoint).startswith("http://"):
        client.setdefault("allow_http", True)
    provider = _no_instance_metadata(opts, uri) if kind == "s3" else None
    try:
        if kind == "s3":
            opts.setdefault("region", "us-east-1")
            store: Any = S3Store(bucket, config=opts, client_options=client, retry_config=retry,
                                 **({"credential_provider": provider} if provider else {}))
        elif kind == "gcs":
            store = GCSStore(bucket, config=opts, client_options=client, retry_config=retry)
        else:
            store = AzureStore(bucket, config=opts, client_options=client, retry_config=retry)
    except Exception as exc:  # noqa: BLE001 - obstore raises several types for bad configuration
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StorageError(f"cannot configure the {kind} client: {first}", path=uri) from None

    def arrow_fs() -> tuple[Any, str]:
        return _arrow_filesystem(kind, bucket, opts, client, max_retries), bucket

    return ObjectStorage(uri, store, arrow_fs, counts=counts, prefix=prefix, suffix_ranges=kind != "azure")


# Where object_store's S3 client finds credentials without being given keys (its order): a web identity
# token (EKS), container credentials (ECS), and last the EC2 instance-metadata service at 169.254.169.254.
_CREDENTIAL_VARS = ("AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                    "AWS_CONTAINER_CREDENTIALS_FULL_URI")


def _no_instance_metadata(opts: dict[str, Any], uri: str) -> Any:
    """A credential provider that says "no credentials", when the instance-metadata probe must be skipped.

    Without keys, object_store asks the EC2 instance-metadata address (169.254.169.254) for an
    instance role's credentials.  Towards an S3-compatible endpoint (`endpoint` /
    `AWS_ENDPOINT_URL`: MinIO, a local moto, another cloud) that probe is never useful and
    leaks a request to the local network, so it is skipped there, as it is everywhere with
    `AWS_EC2_METADATA_DISABLED=true` (the AWS SDKs' variable).  `AWS_EC2_METADATA_DISABLED=false`
    (or the option `ec2_metadata_disabled=false`) turns the probe back on, e.g. on EC2 with an
    instance role behind a VPC endpoint.  Keys, a session token, `skip_signature`, a web identity
    or container credentials are used as before.  None: let object_store look as it does."""
    setting = opts.pop("ec2_metadata_disabled", None)
    if setting is not None and str(setting).strip().lower() not in ("true", "false", "1", "0", "yes", "no", "on", "off"):
        raise StorageError(f"ec2_metadata_disabled (AWS_EC2_METADATA_DISABLED) must be true or false, not {setting!r}",
                           path=uri)
    endpoint = opts.get("endpoint") or os.environ.get("AWS_ENDPOINT")  # (obstore reads AWS_ENDPOINT itself)
    disabled = _truthy(setting) if setting is not None else bool(endpoint)
    has_keys = opts.get("access_key_id") or opts.get("secret_access_key") or opts.get("session_token") or \
        opts.get("token") or os.environ.get("AWS_ACCESS_KEY_ID") or os.environ.get("AWS_SECRET_ACCESS_KEY")
    other = _truthy(opts.get("skip_signature", os.environ.get("AWS_SKIP_SIGNATURE", ""))) or \
        any(os.environ.get(v) for v in _CREDENTIAL_VARS)
    if not disabled or has_keys or other:
        return None
    why = "AWS_EC2_METADATA_DISABLED / ec2_metadata_disabled is true"

    def no_credentials() -> Any:
        raise StorageError(f"{NO_CREDENTIALS} no access key was given (storage_options access_key_id and "
                           "secret_access_key, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY), and the instance-"
                           f"metadata lookup is off ({'an endpoint is set' if setting is None else why}; "
                           "AWS_EC2_METADATA_DISABLED=false turns it on; skip_signature=true sends unsigned requests "
                           "to a public bucket)", path=uri)

    return no_credentials


def _arrow_filesystem(kind: str, bucket: str, opts: Mapping[str, Any], client: Mapping[str, Any],
                      max_retries: int) -> Any:
    """The pyarrow file system for Parquet, configured like the obstore client."""
    import pyarrow.fs as pafs

    timeout = client["timeout"].total_seconds()
    connect = client["connect_timeout"].total_seconds()
    try:
        if kind == "s3":
            endpoint = opts.get("endpoint")
            scheme = "https"
            if endpoint:
                split = urlsplit(str(endpoint))
                if split.scheme:
                    scheme, endpoint = split.scheme, split.netloc + split.path.rstrip("/")
            if client.get("allow_http") and not opts.get("endpoint"):
                scheme = "http"
            return pafs.S3FileSystem(
                access_key=opts.get("access_key_id"), secret_key=opts.get("secret_access_key"),
                session_token=opts.get("session_token"), region=opts.get("region"),
                endpoint_override=endpoint, scheme=scheme, request_timeout=timeout, connect_timeout=connect,
                retry_strategy=pafs.AwsStandardS3RetryStrategy(max_attempts=max_retries + 1),
                anonymous=_truthy(opts.get("skip_signature", False)))
        if kind == "gcs":
            return pafs.GcsFileSystem(endpoint_override=opts.get("endpoint"),
                                      scheme="http" if client.get("allow_http") else "https",
                                      retry_time_limit=timedelta(seconds=max(1.0, timeout)))
        return pafs.AzureFileSystem(account_name=str(opts.get("account_name", "")),
                                    account_key=opts.get("account_key"), blob_storage_authority=opts.get("endpoint"),
                                    blob_storage_scheme="http" if client.get("allow_http") else None)
    except Exception as exc:  # noqa: BLE001 - pyarrow raises ArrowInvalid/OSError/TypeError for bad settings
        raise StorageError(f"cannot configure pyarrow's {kind} file system: {exc}", path=f"{kind}://{bucket}") from None
