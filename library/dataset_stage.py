#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: dataset_stage
short_description: Copy a dataset from a shared file system to node-local disk, checked, resumable and timed
description:
  - Makes O(dest) hold a copy of the dataset files of O(source) (C(train-*), C(validation-*), and
    C(SHA256SUMS) where the source has one), what users of a shared parallel file system do before
    training (the Summitdev study's GPFS to NVMe; C($SCRATCH) to node-local disk or C(/dev/shm)).
  - A file of O(dest) with the source's size and modification time is staged already and left
    alone (rsync's quick check; each copy gets the source's time, as C(cp -a) gives it), so a
    second staging copies nothing and reports RV(already_staged).
  - O(dest)'s free room is checked against what is still to copy before any byte is copied.
  - Each copy goes to a hidden temporary name in O(dest) (C(.NAME.dtfbench-partial), which never
    matches C(train-*)), is flushed to disk, checked (its size, and its SHA-256 against the
    source's C(SHA256SUMS) where it has one, computed while it streams) and renamed onto its final
    name, so a final name only ever holds a whole, checked file. A staging killed halfway resumes
    with the files it finished; the next one removes its temporary files.
  - A second staging into the same O(dest) at once waits for the first (a lock file).
  - The engine is C(dtfbench.node.stage_data) (standard library only); a Slurm job runs its copy,
    C(dtfbench_stage_data.py), on every node of the job. What the figures mean for a sweep is in
    this project's docs/storage.md.
version_added: "0.1.0"
author: dtfbench developers
options:
  source:
    description: The shared copy of the dataset (a folder of TFRecord shards).
    type: path
    required: true
  dest:
    description: The node-local folder that receives the copy, created when missing.
    type: path
    required: true
  workers:
    description: Files copied at once (threads).
    type: int
    default: 4
notes:
  - Supports check mode; it reports what would be copied and writes nothing.
  - C(changed) is true only when a file was copied (in check mode, would be), or a temporary file of a killed staging removed.
seealso:
  - module: s3_dataset_sync
    description: The dataset from S3 to local disk (the AWS path).
"""

EXAMPLES = r"""
- name: Stage ImageNet from the shared file system to the node's local SSD
  dataset_stage:
    source: /scratch/shared/imagenet
    dest: /mnt/local_ssd/imagenet
  register: staged

- name: Say how long it took
  ansible.builtin.debug:
    msg: "{{ staged.copied_bytes / 1e9 }} GB in {{ staged.seconds }} s ({{ staged.mb_per_s }} MB/s)"
"""

RETURN = r"""
files:
  description: Dataset files in the source (SHA256SUMS included).
  returned: success
  type: int
  sample: 1153
bytes:
  description: Their total size.
  returned: success
  type: int
  sample: 147897477120
copied_files:
  description: Files copied by this staging (in check mode, that it would copy).
  returned: success
  type: int
  sample: 1153
copied_bytes:
  description: Bytes copied by this staging.
  returned: success
  type: int
  sample: 147897477120
skipped_files:
  description: Files staged already, left alone.
  returned: success
  type: int
  sample: 0
skipped_bytes:
  description: Their size.
  returned: success
  type: int
  sample: 0
checksummed_files:
  description: Copies checked against the source's SHA256SUMS.
  returned: success
  type: int
  sample: 1152
checksums:
  description: C(SHA256SUMS) where the source has it, else null (sizes only).
  returned: success
  type: str
  sample: SHA256SUMS
already_staged:
  description: Whether every file was staged already (nothing copied).
  returned: success
  type: bool
  sample: false
partial_removed:
  description: Temporary files of an earlier, killed staging that were removed.
  returned: success
  type: list
  elements: str
  sample: [.train-00017-of-01024.dtfbench-partial]
seconds:
  description: The whole staging, listing and checks included.
  returned: success
  type: float
  sample: 412.5
copy_seconds:
  description: The copying alone.
  returned: success
  type: float
  sample: 411.9
mb_per_s:
  description: Bytes copied per copy second, in 10^6 bytes/s; null when nothing was copied.
  returned: success
  type: float
  sample: 359.1
source_filesystem:
  description: The file system under O(source) (C(fs_type), C(source), C(mount_point), C(network)).
  returned: success
  type: dict
  sample: {fs_type: nfs4, source: "10.0.0.1:/export/imagenet", mount_point: /scratch/shared, network: true}
target_filesystem:
  description: The file system under O(dest); null in check mode before O(dest) exists.
  returned: success
  type: dict
  sample: {fs_type: xfs, source: /dev/nvme0n1, mount_point: /mnt/local_ssd, network: false}
node:
  description: The node's name (C(uname -n)).
  returned: success
  type: str
  sample: node01
"""

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.dtfbench.node.stage_data import StageError, stage


def main():
    module = AnsibleModule(
        argument_spec=dict(
            source=dict(type="path", required=True),
            dest=dict(type="path", required=True),
            workers=dict(type="int", default=4),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["workers"] < 1:
        module.fail_json(msg=f"workers={params['workers']}: give at least 1 file copied at once")
    try:
        report = stage(params["source"], params["dest"], params["workers"], check_mode=module.check_mode)
    except StageError as error:
        module.fail_json(msg=str(error))
    except OSError as error:
        module.fail_json(msg=f"the staging of {params['source']} into {params['dest']} failed: {error}")
    changed = bool(report["copied_files"] or report["partial_removed"])  # in check mode: would change
    module.exit_json(changed=changed, **report)


if __name__ == "__main__":
    main()
