"""The console's HTML, rendered on the server from plain data (pure functions).

Everything interpolated goes through ``base.h`` (HTML escaping). The pages carry no inline
script or style (the Content-Security-Policy forbids both): behaviour comes from
``/static/console.js``, wired by ``data-*`` attributes. One module per page; ``base``
holds the frame, badges and banners they share.
"""
