# SPDX-License-Identifier: BSD-3-Clause
"""Where the perf/ scripts find psgate's binaries, put their results and read
the revision they measured, both in the source tree and as installed by the
psgate-tools package.

The scripts run from one of two places, with the same relative layout:
  - the source tree: perf/ beside meson.build; binaries in a build directory
    (build*/src/psgate, build*/perf/gen/psgate-gen, ...); results under
    perf/results/; the revision is `git describe` of the tree;
  - installed: <prefix>/share/psgate-tools (/usr/share/psgate-tools);
    psgate, psgatectl and psgate-gen in <prefix>/bin, psemu (a test program,
    not a command) in <prefix>/lib/psgate-tools; results under the current
    directory (never into /usr/share); the revision is what the binaries and
    the package say.

A binary is looked up, first match wins: the script's explicit option or
environment variable (the caller's business), a build directory of the tree,
the installed location beside the scripts, /usr's, then PATH.
"""
import os
import shutil
import subprocess

PERF = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # perf/ or .../share/psgate-tools
_parent = os.path.dirname(PERF)
# The source tree's root, or None when the scripts are installed (no meson.build beside them).
TREE = _parent if os.path.isfile(os.path.join(_parent, "meson.build")) and \
    os.path.isdir(os.path.join(_parent, "src")) else None

# Binary -> its path inside a build directory.
IN_BUILD = {
    "psgate": "src/psgate",
    "psgatectl": "src/psgatectl/psgatectl",
    "psgate-gen": "perf/gen/psgate-gen",
    "psemu": "perf/psemu/psemu",
    "psgate-micro": "perf/micro/psgate-micro",  # built with -Dtests; never installed
}


def _installed_dirs(name):
    """Directories an installed `name` lives in: beside these scripts' prefix first
    (a package unpacked into another root), then /usr."""
    sub = os.path.join("lib", "psgate-tools") if name == "psemu" else "bin"
    dirs = []
    if TREE is None and os.path.basename(PERF) == "psgate-tools" and \
            os.path.basename(os.path.dirname(PERF)) == "share":
        dirs.append(os.path.join(os.path.dirname(os.path.dirname(PERF)), sub))
    dirs.append(os.path.join("/usr", sub))
    return dirs


def _exe(path):
    return path if path and os.path.isfile(path) and os.access(path, os.X_OK) else None


def build_dirs():
    """The tree's build directories (build, build-asan, ...), none when installed."""
    if TREE is None:
        return []
    return [os.path.join(TREE, d) for d in sorted(os.listdir(TREE))
            if d.startswith("build") and os.path.isdir(os.path.join(TREE, d))]


def default_build():
    """The build directory a script uses when told none: the tree's build/ if it
    exists, else None (installed binaries)."""
    if TREE is not None and os.path.isdir(os.path.join(TREE, "build")):
        return os.path.join(TREE, "build")
    return None


def in_dir(name, d):
    """`name` in directory d, which is a build directory (src/psgate, ...) or a
    directory of installed binaries (/usr/bin: psgate, psgatectl, psgate-gen side
    by side; psemu in ../lib/psgate-tools). The build path when neither exists,
    so the caller's error names what is missing."""
    built = os.path.join(d, IN_BUILD[name])
    if _exe(built):
        return built
    flat = os.path.join(d, name) if name != "psemu" else \
        os.path.join(os.path.dirname(os.path.abspath(d)), "lib", "psgate-tools", "psemu")
    return flat if _exe(flat) else built


def installed(name):
    """The installed `name` (beside the scripts, /usr, then PATH), or None."""
    for d in _installed_dirs(name):
        if _exe(os.path.join(d, name)):
            return os.path.join(d, name)
    return shutil.which(name) if name != "psemu" else None


def find(name, build=None):
    """Path to `name`: in `build` when given (a build directory or a directory of
    installed binaries; the path even if missing, for the caller's error); else the
    most recently built copy in the tree's build directories; else installed. None
    when nowhere."""
    if build:
        return in_dir(name, build)
    found = [p for p in (os.path.join(b, IN_BUILD[name]) for b in build_dirs()) if _exe(p)]
    if found:
        return max(found, key=os.path.getmtime)
    return installed(name)


def results_dir(name):
    """Default results directory for a script: perf/results/<name> in the tree,
    ./psgate-results/<name> when installed (the scripts' own directory is read-only)."""
    if TREE is not None:
        return os.path.join(TREE, "perf", "results", name)
    return os.path.join(os.getcwd(), "psgate-results", name)


def package_version():
    """psgate-tools' Debian version, or None when not installed by dpkg."""
    try:
        r = subprocess.run(["dpkg-query", "-W", "-f", "${Version}", "psgate-tools"], capture_output=True,
                           text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return r.stdout.strip() if r.returncode == 0 and r.stdout.strip() else None


def binary_version(path):
    """What `path --version` prints (psgate: its version string), or None."""
    if not path:
        return None
    try:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    out = (r.stdout or r.stderr).strip().splitlines()
    return out[0].strip() if r.returncode == 0 and out else None


def revision(git_args=("describe", "--always", "--dirty"), psgate=None):
    """The revision measured: `git <git_args>` of the tree when it is a git checkout;
    otherwise the installed package's version and the psgate binary's own --version
    (e.g. "psgate-tools 0.1.0-1, psgate 0.1.0"); "unknown" when none answers."""
    if TREE is not None:
        try:
            r = subprocess.run(["git", "-C", TREE] + list(git_args), capture_output=True, text=True, timeout=30)
            if r.returncode == 0 and r.stdout.strip():
                return r.stdout.strip()
        except (OSError, subprocess.SubprocessError):
            pass
    parts = []
    pkg = package_version()
    if pkg:
        parts.append(f"psgate-tools {pkg}")
    ver = binary_version(psgate)
    if ver:
        parts.append(ver if ver.startswith("psgate") else f"psgate {ver}")
    return ", ".join(parts) if parts else "unknown"


def in_git_tree():
    """Whether the scripts run from a git checkout (so `git status` means something)."""
    if TREE is None:
        return False
    try:
        return subprocess.run(["git", "-C", TREE, "rev-parse", "--git-dir"], capture_output=True,
                              timeout=30).returncode == 0
    except (OSError, subprocess.SubprocessError):
        return False


def binaries(build=None, names=("psgate", "psgatectl", "psgate-gen")):
    """{name: path} for scripts that run one build: `build` when given, else the
    tree's build/ when it exists (what they always used), else the installed
    binaries. A missing one maps to where it was expected, for the error."""
    build = build or default_build()
    if build:
        return {n: in_dir(n, build) for n in names}
    return {n: installed(n) or os.path.join(_installed_dirs(n)[0], n) for n in names}
