"""The bundle's CycloneDX SBOM (JSON, spec 1.6): one component per wheel with its version, licence, SHA-256 and
package URL, read from the wheel's own METADATA, written and schema-checked with cyclonedx-python-lib (the OWASP
CycloneDX project's library), so the document follows the spec without a hand-written serializer."""

from __future__ import annotations

import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path

from a2x_local import extras
from a2x_local.errors import InternalError

# A licence field longer than this, or spread over lines, is licence text rather than a name.
_MAX_LICENSE_NAME = 100


@dataclass(frozen=True)
class WheelInfo:
    """What the SBOM says about one wheel."""
    file: Path
    name: str
    version: str
    summary: str
    license: str | None        # an SPDX expression or a licence name, when the metadata declares one
    license_text: str | None   # the wheel's licence file, when it declares no licence
    sha256: str


def _metadata(wheel: zipfile.ZipFile) -> Message:
    names = [n for n in wheel.namelist() if n.count("/") == 1 and n.endswith(".dist-info/METADATA")]
    if len(names) != 1:
        raise InternalError(f"{wheel.filename}: expected one .dist-info/METADATA, found {len(names)}",
                            hint="the wheel is damaged; build the bundle again")
    return Parser().parsestr(wheel.read(names[0]).decode("utf-8", errors="replace"))


def declared_license(meta: Message) -> str | None:
    """The licence a distribution declares: License-Expression (PEP 639), else a short License field (the first
    line of licence text pasted there), else the licence classifiers."""
    if meta.get("License-Expression"):
        return meta["License-Expression"].strip()
    field = (meta.get("License") or "").strip()
    first_line = field.splitlines()[0].strip() if field else ""
    if first_line and len(first_line) <= _MAX_LICENSE_NAME and first_line.upper() != "UNKNOWN":
        return first_line
    classifiers = [c.split("::")[-1].strip() for c in meta.get_all("Classifier") or [] if c.startswith("License ::")]
    named = [c for c in classifiers if c not in ("OSI Approved", "Other/Proprietary License")] or classifiers
    return " AND ".join(named) if named else None


def read_wheel(path: Path, sha256: str) -> WheelInfo:
    with zipfile.ZipFile(path) as wheel:
        meta = _metadata(wheel)
        license = declared_license(meta)
        text = None
        if license is None:
            files = meta.get_all("License-File") or []
            inside = [n for n in wheel.namelist() if any(n.endswith("/" + f) or n.endswith("/licenses/" + f)
                                                         for f in files)]
            text = wheel.read(inside[0]).decode("utf-8", errors="replace") if inside else None
    return WheelInfo(path, meta["Name"], meta["Version"], (meta.get("Summary") or "").strip(), license, text, sha256)


def write_sbom(out: Path, wheels: list[WheelInfo], *, project: WheelInfo, bundle_id: str, target: str) -> None:
    """Write ``out`` (CycloneDX JSON 1.6): the bundle as the described application, every wheel a component."""
    extras.check("cyclonedx", feature="the bundle's SBOM")
    from cyclonedx.contrib.license.factories import LicenseFactory
    from cyclonedx.model import AttachedText, HashAlgorithm, HashType, Property
    from cyclonedx.model.bom import Bom
    from cyclonedx.model.component import Component, ComponentType
    from cyclonedx.model.license import DisjunctiveLicense
    from cyclonedx.output.json import JsonV1Dot6
    from cyclonedx.schema import SchemaVersion
    from cyclonedx.validation.json import JsonStrictValidator
    from packageurl import PackageURL

    factory = LicenseFactory()

    def component(wheel: WheelInfo, kind: ComponentType) -> Component:
        if wheel.license:
            licenses = [factory.make_from_string(wheel.license)]
        else:  # declared nowhere: say so, and carry the licence file's text for a reader to judge
            text = AttachedText(content=wheel.license_text) if wheel.license_text else None
            licenses = [DisjunctiveLicense(name="not declared in the package metadata", text=text)]
        return Component(name=wheel.name, version=wheel.version, type=kind, description=wheel.summary or None,
                         bom_ref=f"pkg:pypi/{wheel.name}@{wheel.version}", licenses=licenses,
                         purl=PackageURL(type="pypi", name=wheel.name.lower(), version=wheel.version),
                         hashes=[HashType(alg=HashAlgorithm.SHA_256, content=wheel.sha256)],
                         properties=[Property(name="a2x-local:wheel", value=wheel.file.name)])

    bom = Bom()
    root = component(project, ComponentType.APPLICATION)
    root.properties.add(Property(name="a2x-local:bundle-id", value=bundle_id))
    root.properties.add(Property(name="a2x-local:target", value=target))
    bom.metadata.component = root
    parts = [component(wheel, ComponentType.LIBRARY) for wheel in wheels]
    for part in parts:
        bom.components.add(part)
    bom.register_dependency(root, parts)
    text = JsonV1Dot6(bom).output_as_string(indent=2)
    problem = JsonStrictValidator(SchemaVersion.V1_6).validate_str(text)
    if problem is not None:
        raise InternalError(f"the SBOM does not validate against CycloneDX 1.6: {problem}",
                            hint="this is a bug in a2x-local's bundle; report it with the bundle's wheel list")
    out.write_text(text + "\n", encoding="utf-8")
