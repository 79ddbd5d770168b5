#!/usr/bin/python
# Copyright: dtfbench developers
# Apache License 2.0 (see LICENSE)

from __future__ import annotations

DOCUMENTATION = r"""
---
module: s3_dataset_sync
short_description: Download an S3 prefix (a TFRecord data set) into a local directory, in parallel, resumably, verified
description:
  - Makes O(dest) hold every object under O(source) whose base name matches O(include), with
    one paginated LIST, one C(stat) per local file, then parallel GETs of what is missing,
    of the wrong size, or not vouched for by the manifest of an earlier sync.
  - Each download goes to a hidden temporary file in O(dest) (C(.NAME.dtfbench-partial),
    which never matches C(train-*) or C(validation-*)), is checked (size, and the object's
    own full-object S3 checksum - CRC64NVME, CRC32C, CRC32, SHA, XXHASH, or else MD5, which
    botocore does not check - computed while it streams;
    for an object without one, MD5 where the ETag is one, which an SSE-KMS object's is not)
    and renamed onto its final name,
    so a final name only ever holds a whole file. Temporary files left by a killed sync are removed by the next one; files it
    finished are kept (a journal records them as they complete).
  - At the end every listed object must have a local file of its size, else the module fails.
  - Why a module of ours? No amazon.aws or community.aws module downloads a prefix.
    M(amazon.aws.s3_object) gets one object per call (a HEAD and a GET each, one after the
    other), and M(community.aws.s3_sync) only uploads a local directory to S3.
  - The engine is C(dtfbench s3sync) (also C(python -m dtfbench s3sync) on the command line);
    the staging benchmark C(benchmarks/staging.py) compares it with C(aws s3 sync) and a raw
    parallel GET loop.
  - Runs on the node that gets the data; that node's Python needs boto3 and botocore, and
    awscrt to check CRC32C, CRC64NVME and XXHASH checksums (without it those objects are
    checked by their MD5 ETag instead), and isal for a CRC32 that costs a fraction of
    zlib's CPU time (zlib's without it).
version_added: "0.1.0"
author: dtfbench developers
options:
  source:
    description: The data set, as C(s3://BUCKET/PREFIX) (the prefix may be empty).
    type: str
    required: true
  dest:
    description: Local directory that receives the files, created when missing.
    type: path
    required: true
  include:
    description:
      - Base-name globs of the objects to sync; empty for every object under the prefix.
      - With O(delete), local files that match none are removed too.
    type: list
    elements: str
    default: []
  workers:
    description: Parallel downloads (threads, one connection each).
    type: int
    default: 16
  delete:
    description: Remove local files that are not (or no longer) under the prefix.
    type: bool
    default: false
  verify_checksums:
    description:
      - Hash every local file whose object has an MD5 ETag, not only the ones the manifest
        does not vouch for. Slow for a large data set (it reads everything); for a suspected disk problem.
    type: bool
    default: false
  max_bandwidth:
    description: Bytes per second for all workers together; 0 for no limit.
    type: int
    default: 0
extends_documentation_fragment:
  - amazon.aws.common.modules
  - amazon.aws.region.modules
  - amazon.aws.boto3
notes:
  - Supports check mode; it reports what would be downloaded and removed (it lists the
    bucket and may hash local files, and changes nothing).
  - C(changed) is true only when a file was downloaded or removed (temporary files of a killed sync included).
  - The endpoint comes from O(endpoint_url), else from C(AWS_ENDPOINT_URL) in the module's
    environment (boto3 reads it), else AWS.
"""

EXAMPLES = r"""
- name: Sync ImageNet's TFRecords onto the node's local SSD
  s3_dataset_sync:
    source: s3://my-datasets/imagenet/tfrecords
    dest: /mnt/local_ssd/imagenet
    include: [train-*, validation-*]
    workers: 32
  register: dataset_sync

- name: Against moto or another S3-compatible endpoint, with credentials from variables
  s3_dataset_sync:
    source: s3://dtfbench-data/imagenet
    dest: /mnt/local_ssd/imagenet
    endpoint_url: http://10.213.57.1:5000
    access_key: "{{ aws_access_key_id }}"
    secret_key: "{{ aws_secret_access_key }}"
    region: us-east-1
  no_log: true
"""

RETURN = r"""
files:
  description: Objects under the prefix (after O(include)).
  returned: success
  type: int
  sample: 1152
bytes:
  description: Their total size.
  returned: success
  type: int
  sample: 147897477120
downloaded_files:
  description: Files downloaded by this run.
  returned: success
  type: int
  sample: 3
downloaded_bytes:
  description: Bytes downloaded by this run.
  returned: success
  type: int
  sample: 402653184
skipped_files:
  description: Files already complete, left alone.
  returned: success
  type: int
  sample: 1149
skipped_bytes:
  description: Their size.
  returned: success
  type: int
  sample: 147494823936
hashed_files:
  description: Local files of the right size the manifest did not vouch for, hashed to decide.
  returned: success
  type: int
  sample: 0
deleted:
  description: Local files removed (O(delete)).
  returned: success
  type: list
  elements: str
  sample: []
partial_removed:
  description: Temporary files of an earlier, killed sync that were removed.
  returned: success
  type: list
  elements: str
  sample: [.train-00017-of-01024.dtfbench-partial]
to_download:
  description: In check mode, the files a run would download.
  returned: check mode
  type: list
  elements: str
  sample: [train-00017-of-01024]
download_checks:
  description:
    - What checked the bytes of the files this run downloaded, with how many files each.
    - An S3 checksum's algorithm (C(CRC64NVME), C(CRC32C), C(CRC32), ..., C(MD5)) when the
      object has a full-object one; C(MD5) also for an object without one whose ETag is an MD5
      (not an SSE-KMS object);
      C(size) when neither applies (a multipart upload without a full-object checksum).
  returned: success
  type: dict
  sample: {CRC64NVME: 1150, MD5: 2}
seconds:
  description: Wall time of the sync.
  returned: success
  type: float
  sample: 12.5
mb_per_s:
  description: Downloaded megabytes (10^6 bytes) per second of wall time.
  returned: success
  type: float
  sample: 32.2
verified:
  description: Every listed object has a local file of its size (false only in check mode).
  returned: success
  type: bool
  sample: true
"""

try:
    import botocore
except ImportError:  # botocore is optional here: AnsibleAWSModule reports the missing SDK
    pass

from ansible.module_utils.dtfbench.node.s3sync import SyncError, client_config, skip_timestamp_parsing, sync
from ansible_collections.amazon.aws.plugins.module_utils.modules import AnsibleAWSModule


def main():
    module = AnsibleAWSModule(
        argument_spec=dict(
            source=dict(type="str", required=True),
            dest=dict(type="path", required=True),
            include=dict(type="list", elements="str", default=[]),
            workers=dict(type="int", default=16),
            delete=dict(type="bool", default=False),
            verify_checksums=dict(type="bool", default=False),
            max_bandwidth=dict(type="int", default=0),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if params["workers"] < 1:
        module.fail_json(msg=f"workers={params['workers']}: give at least 1 parallel download")
    if params["max_bandwidth"] < 0:
        module.fail_json(msg=f"max_bandwidth={params['max_bandwidth']}: give bytes per second, or 0 for no limit")
    client = skip_timestamp_parsing(module.client("s3", config=client_config(params["workers"])))
    try:
        report = sync(
            client,
            params["source"],
            params["dest"],
            workers=params["workers"],
            delete=params["delete"],
            include=params["include"],
            verify_checksums=params["verify_checksums"],
            max_bandwidth=params["max_bandwidth"],
            check_mode=module.check_mode,
        )
    except SyncError as err:
        module.fail_json(msg=str(err))
    except (botocore.exceptions.BotoCoreError, botocore.exceptions.ClientError) as err:
        module.fail_json_aws(err, msg=f"S3 refused or failed the sync of {params['source']}")
    except OSError as err:
        module.fail_json(msg=f"cannot write into {params['dest']}: {err}")
    result = report.as_dict()
    if not module.check_mode:
        result.pop("to_download")
    module.exit_json(**result)


if __name__ == "__main__":
    main()
