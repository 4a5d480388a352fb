"""What a variant needs before it can be built, and the commands that provide each: read by the
README's variant table, by `invoke build` when a lock is missing, and by the local CI profile.

Pure: a Variant in, sentences out. A Debian base is made on any machine (`invoke base`, Debian's
archive); every other base comes from a registry (or, for Ubuntu, a reachable Ubuntu archive); a
conda env needs a conda mirror to lock and to build, a pip env only a PyPI index."""

from __future__ import annotations

from dataclasses import dataclass

from rapidship.config.matrix import Flavour, Variant

# the archive `invoke base` reaches on any machine (imagebuild/base.py's default mirror)
MADE_ANYWHERE = "debian"


@dataclass(frozen=True)
class Need:
    what: str          # "an Ubuntu 22.04 base in the registry"
    provided_by: str   # the commands that provide it
    anywhere: bool     # this machine's public archives suffice (PyPI, Debian)

    def sentence(self) -> str:
        return f"{self.what} ({self.provided_by})"


def _a(words: str) -> str:
    return f"{'an' if words[0].lower() in 'aeiou' else 'a'} {words}"


def _os_name(v: Variant) -> str:
    return f"{v.distro.capitalize()} {v.os_version}"


def needs(v: Variant) -> list[Need]:
    """The base and the env mirror the variant needs, in that order."""
    if v.distro == MADE_ANYWHERE:
        base = Need(f"{_a(_os_name(v))} base", f"`invoke base --os {v.os}` makes it from Debian's archive", True)
    elif v.family == "deb":
        base = Need(f"{_a(_os_name(v))} base in the registry",
                    f"pulled as {v.bases.runtime} through the proxy cache `invoke harbor.apply` sets up, "
                    f"or `invoke base --os {v.os} --mirror URL` from an {v.distro.capitalize()} archive mirror", False)
    else:
        base = Need(f"{_a(_os_name(v))} base in the registry",
                    f"pulled as {v.bases.runtime} through the proxy cache `invoke harbor.apply` sets up; "
                    "mmdebstrap cannot make an RPM-family base", False)
    if v.flavour is Flavour.conda:
        env = Need("a conda mirror", f"`invoke lock --env {v.env} --conda-channel NAME=URL` makes the locks, "
                                     f"`invoke build --variant {v.id} --conda-channel URL` installs them", False)
    else:
        env = Need("a PyPI index", f"PyPI, or `invoke build --variant {v.id} --pip-index URL` for a mirror", True)
    return [base, env]


def missing_here(v: Variant) -> list[Need]:
    """What a machine that reaches only PyPI and Debian's archive lacks for this variant."""
    return [n for n in needs(v) if not n.anywhere]


def needs_sentence(v: Variant) -> str:
    """One sentence: what the variant needs that public archives do not give, and the commands."""
    wanted = missing_here(v) or needs(v)
    return f"{v.id} needs " + " and ".join(n.sentence() for n in wanted)
