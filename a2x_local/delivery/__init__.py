"""Delivery to air-gapped machines: the offline bundle (wheelhouse, project wheel, models, SHA256SUMS, CycloneDX SBOM,
install.sh) and model archives with manifests, packed on a connected machine and verified on the far side."""

from a2x_local.delivery.bundle import BundleRequest, build_bundle
from a2x_local.delivery.model_files import check_name as check_model_name
from a2x_local.delivery.model_pack import ModelToPack, pack_model, verify_model
from a2x_local.delivery.pins import TARGETS

__all__ = [
    "TARGETS",
    "BundleRequest",
    "ModelToPack",
    "build_bundle",
    "check_model_name",
    "pack_model",
    "verify_model",
]
