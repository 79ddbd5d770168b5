"""Helpers that run on the nodes: nvidia-smi, S3 dataset sync (raw read throughput: linux/, re-exported here).

Standard library only (botocore is handed in by the caller); shipped to Ansible modules as
``ansible.module_utils.dtfbench.node``; relative imports.
"""
