"""distval's sample image as the image under test for want of one: said first, and refused in a pipeline ($CI)
unless --sample-image says it is meant."""

from __future__ import annotations

from collections.abc import Mapping

from distval.config.shipped import DEFAULT_IMAGE, SAMPLE_IMAGE_FLAG
from distval.errors import SampleImageRefused
from distval.plan.model import RunPlan

# Said first on stderr (with --quiet too) and first in the summary when the image under test is distval's sample
# image because no --image was given: a first run must not be read as a verdict on the user's image.
SAMPLE_IMAGE_NOTE = f"no --image: validating distval's sample image {DEFAULT_IMAGE}"
CI_ENV = "CI"
# What CI=... means "not in CI" (any other non-empty value is a CI: GitHub, GitLab, CircleCI, Travis set "true").
_NOT_CI = ("", "0", "false", "no", "off")


def in_ci(environ: Mapping[str, str]) -> bool:
    """Whether $CI says this runs in a pipeline."""
    return environ.get(CI_ENV, "").strip().lower() not in _NOT_CI


def falls_back_to_sample(plan: RunPlan, image_option: str | None) -> bool:
    """Whether a scenario that runs names no image and no --image was given: it runs distval's sample image."""
    return image_option is None and any(s.scenario.image is None for s in plan.scenarios)


def sample_image_note(plan: RunPlan, image_option: str | None) -> str | None:
    """SAMPLE_IMAGE_NOTE when a scenario runs the sample image for want of an image (``falls_back_to_sample``)."""
    return SAMPLE_IMAGE_NOTE if falls_back_to_sample(plan, image_option) else None


def refuse_sample_in_ci(plan: RunPlan, image_option: str | None, sample_image: bool, environ: Mapping[str, str]) -> None:
    """In a pipeline ($CI), a run that would validate the sample image for want of an image is refused unless
    --sample-image says it is meant: a gate on distval's own image passes whatever image the pipeline built."""
    if sample_image or not in_ci(environ) or not falls_back_to_sample(plan, image_option):
        return
    raise SampleImageRefused(
        f"no image named and ${CI_ENV} is set: this run would validate distval's sample image {DEFAULT_IMAGE}, not "
        f"yours; give --image IMG (or image: in the config), or {SAMPLE_IMAGE_FLAG} to validate the sample on purpose"
    )
