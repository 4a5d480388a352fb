"""The release chain (`invoke release`): build, gates, scan, push, sign, export, export-verify, report."""
