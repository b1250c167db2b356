"""The core below the analyses, written once: table and column names (:mod:`.tables`), interval union /
merge / overlap / exclusive time (:mod:`.intervals`), categorical helpers (:mod:`.categorical`), the device
peaks of a track (:mod:`.devices`), the one definition of device time, achieved rates and bound
(:mod:`.devicetime`), copies handed to callers (:mod:`.memo`) and which traces form a run (:mod:`.runs`).
Nothing here imports an analysis."""
