"""The one way the CLI and the console reach Kubernetes: the user's own ``kubectl``.

No client library and no credential of the CLI's own: every call is the administrator's
``kubectl`` with their kubeconfig, so it behaves exactly as their own commands would.
``errors`` reads kubectl's failures once for both front ends; ``sync`` is the CLI's
blocking binding (``Kube``), ``aio`` the console's asyncio one (``Cluster``); ``forward``
holds ``kubectl port-forward`` for both; ``credential`` finds the kubeconfig's bearer
token for admin calls.
"""
