"""One function per stage, what its task (src/rapidship/cli/, which parses the flags) and `invoke release`
(src/rapidship/release/) both call: the release composes these, it never runs a task."""
