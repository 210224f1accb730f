"""Volumes a platform team adds to the pods (``pod.volumes``) and mounts into the container
(``container.volumeMounts``), in Kubernetes' own shapes: ConfigMaps, Secrets, emptyDirs and
claims, one source per volume."""

from __future__ import annotations

from typing import Literal

from pydantic import ConfigDict, Field

from kaos_core.crds.common import LIST_MAX, NAME_MAX, CRDModel
from kaos_core.crds.shapes import VOLUME_NAME, ObjectName, Quantity, exactly_one

_MODE = "File mode bits (0 to 0777; in YAML as octal 0644 or decimal 420)"


class VolumeMount(CRDModel):
    """A volume of the pod mounted into the container."""

    name: str = Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=VOLUME_NAME,
        description="Name of the volume (one of pod.volumes, or of the operator's).",
    )
    mount_path: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^/",
        description="Absolute path in the container; one the operator mounts is refused.",
    )
    sub_path: str | None = Field(
        default=None,
        max_length=1024,
        pattern=r"^[^/]",
        description="Path within the volume to mount instead of its root.",
    )
    read_only: bool | None = Field(default=None, description="Mount read-only.")


class KeyToPath(CRDModel):
    """One key of a ConfigMap or Secret, as a file."""

    key: str = Field(min_length=1, max_length=253, description="The key.")
    path: str = Field(
        min_length=1,
        max_length=1024,
        pattern=r"^[^/]",
        description="Relative path of the file the key becomes.",
    )
    mode: int | None = Field(default=None, ge=0, le=0o777, description=f"{_MODE} of this file.")


class ConfigMapVolume(CRDModel):
    """A ConfigMap's keys as files."""

    name: ObjectName = Field(description="The ConfigMap, in the resource's namespace.")
    items: list[KeyToPath] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Keys to project, and their paths (default: every key, named after it).",
    )
    default_mode: int | None = Field(
        default=None, ge=0, le=0o777, description=f"{_MODE} of the files (default 0644)."
    )
    optional: bool | None = Field(
        default=None, description="Start the pod even when the ConfigMap does not exist."
    )


class SecretVolume(CRDModel):
    """A Secret's keys as files."""

    secret_name: ObjectName = Field(description="The Secret, in the resource's namespace.")
    items: list[KeyToPath] | None = Field(
        default=None,
        max_length=LIST_MAX,
        description="Keys to project, and their paths (default: every key, named after it).",
    )
    default_mode: int | None = Field(
        default=None, ge=0, le=0o777, description=f"{_MODE} of the files (default 0644)."
    )
    optional: bool | None = Field(
        default=None, description="Start the pod even when the Secret does not exist."
    )


class EmptyDirVolume(CRDModel):
    """A directory that lives as long as the pod."""

    medium: Literal["", "Memory"] | None = Field(
        default=None, description='"" (the node\'s disk, default) or Memory (a tmpfs).'
    )
    size_limit: Quantity | None = Field(
        default=None, description="Most it may hold, e.g. 1Gi; the pod is evicted beyond."
    )


class ClaimVolume(CRDModel):
    """A PersistentVolumeClaim of the resource's namespace."""

    claim_name: ObjectName = Field(description="The claim's name.")
    read_only: bool | None = Field(default=None, description="Mount the claim read-only.")


VOLUME_SOURCES = ("configMap", "secret", "emptyDir", "persistentVolumeClaim")


class Volume(CRDModel):
    """A pod volume from a ConfigMap, a Secret, an emptyDir or a claim."""

    model_config = ConfigDict(
        json_schema_extra=exactly_one(
            VOLUME_SOURCES,
            "a volume takes exactly one of configMap, secret, emptyDir, persistentVolumeClaim",
        )
    )

    name: str = Field(
        min_length=1,
        max_length=NAME_MAX,
        pattern=VOLUME_NAME,
        description="Name the container's volumeMounts use; one the operator uses is refused.",
    )
    config_map: ConfigMapVolume | None = Field(
        default=None, description="A ConfigMap's keys as files."
    )
    secret: SecretVolume | None = Field(default=None, description="A Secret's keys as files.")
    empty_dir: EmptyDirVolume | None = Field(
        default=None, description="A scratch directory that lives as long as the pod."
    )
    persistent_volume_claim: ClaimVolume | None = Field(
        default=None, description="An existing PersistentVolumeClaim."
    )
