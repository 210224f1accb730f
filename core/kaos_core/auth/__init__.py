"""Workload identity: agents prove who they are with Kubernetes service-account tokens.

``names`` holds what the operator, the agent runtime and the memory service must agree
on (audiences, the header, where tokens are mounted, the variables); ``callers`` the
file through which the operator tells a service which agents may call it.
"""
