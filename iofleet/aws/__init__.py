"""AWS-specific domain code that is not CDK.

Two audiences:
- code that runs on the benchmark instances (`instance`, `barrier`, `store`,
  `userdata` output): standard library only, boto3 imported lazily because it
  comes from the distro package `python3-boto3` there;
- the logic behind the Lambdas (`plan`, `launch`, `cell`, `cleanup`,
  `summarize`, `ingest`, `janitor`, `views`): boto3 clients are passed in so
  tests can hand over clients pointed at moto server.
"""
