"""``neuron-explorer``: a local Dash web app over the trace format and the :mod:`analysis` package.

    from explorer.app import create_app
    create_app("traces/").run(host="127.0.0.1", port=8050)

The timeline draws server-side levels of detail (:mod:`explorer.timeline`); every number shown comes
from :mod:`analysis`.
"""
