"""``kaos ui``: the KAOS console, a local web page over the user's kubeconfig identity.

Server-rendered HTML from an aiohttp app on 127.0.0.1 with one small hand-written script
(``static/console.js``: server-sent events for live updates, ``fetch`` for the streamed
chat); every asset ships in this package. The console reaches the Kubernetes API with
``kubectl`` as the rest of the CLI does, and agents and memory services through
``kubectl port-forward``; no credential ever reaches the page.
"""
