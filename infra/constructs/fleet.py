"""Network, security groups, instance role and launch template for the benchmark fleet."""

from __future__ import annotations

from pathlib import Path

from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_ec2 as ec2
from aws_cdk import aws_iam as iam
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_assets as s3_assets
from constructs import Construct

from infra.grants import own_objects
from infra.nag import ack
from infra.staging import stage_agent
from iofleet.aws import keys


class Fleet(Construct):
    def __init__(
        self,
        scope: Construct,
        id: str,
        *,
        vpc_id: str | None,
        bucket: s3.IBucket,
        table: dynamodb.ITableV2,
        staging_root: Path,
    ) -> None:
        super().__init__(scope, id)
        if vpc_id:
            # The only lookup in the app, and only because the user named a VPC.
            self.vpc: ec2.IVpc = ec2.Vpc.from_lookup(self, "Vpc", vpc_id=vpc_id)
        else:
            vpc = ec2.Vpc(
                self,
                "Vpc",
                max_azs=2,
                nat_gateways=0,
                subnet_configuration=[
                    ec2.SubnetConfiguration(
                        name="fleet", subnet_type=ec2.SubnetType.PUBLIC, cidr_mask=20
                    )
                ],
                gateway_endpoints={
                    "S3": ec2.GatewayVpcEndpointOptions(service=ec2.GatewayVpcEndpointAwsService.S3)
                },
            )
            vpc.add_flow_log("FlowLog", traffic_type=ec2.FlowLogTrafficType.REJECT)
            self.vpc = vpc
        self.subnets = (
            self.vpc.select_subnets(subnet_type=ec2.SubnetType.PUBLIC)
            if not vpc_id
            else self.vpc.select_subnets()
        )

        self.security_group = ec2.SecurityGroup(
            self,
            "InstanceSg",
            vpc=self.vpc,
            description="iofleet benchmark instances: no ingress (SSM Session Manager for access)",
            allow_all_outbound=True,
        )
        self.storage_security_group = ec2.SecurityGroup(
            self,
            "SharedStorageSg",
            vpc=self.vpc,
            description="iofleet shared file systems (EFS, FSx OpenZFS, FSx Lustre): NFS and LNet from the fleet only",
            allow_all_outbound=False,
        )
        self.storage_security_group.add_ingress_rule(
            self.security_group, ec2.Port.tcp(2049), "NFS from iofleet instances"
        )
        # FSx for Lustre (iofleet/aws/fsx.py): LNet on 988 and 1018-1023, from the fleet and
        # between the file system's own servers (the FSx for Lustre User Guide, VPC security)
        for port, what in (
            (ec2.Port.tcp(988), "988"),
            (ec2.Port.tcp_range(1018, 1023), "1018-1023"),
        ):
            self.storage_security_group.add_ingress_rule(
                self.security_group, port, f"Lustre {what} from iofleet instances"
            )
            self.storage_security_group.add_ingress_rule(
                self.storage_security_group, port, f"Lustre {what} between the file servers"
            )
            self.storage_security_group.add_egress_rule(
                self.storage_security_group, port, f"Lustre {what} between the file servers"
            )

        agent_dir = stage_agent(staging_root)
        self.agent_asset = s3_assets.Asset(self, "AgentBundle", path=str(agent_dir))

        self.role = iam.Role(
            self,
            "InstanceRole",
            assumed_by=iam.ServicePrincipal("ec2.amazonaws.com"),
            description="iofleet benchmark instance: raw results, its task token, the start barrier",
            managed_policies=[
                iam.ManagedPolicy.from_aws_managed_policy_name("AmazonSSMManagedInstanceCore")
            ],
        )
        ack(
            self.role,
            "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/AmazonSSMManagedInstanceCore]",
            "Session Manager is the only access path to instances (no key pair, no ingress); AWS maintains this policy",
        )
        own_objects(self.role, bucket)
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="ReadAgentBundle",
                actions=["s3:GetObject"],
                resources=[self.agent_asset.bucket.arn_for_objects(self.agent_asset.s3_object_key)],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="SignalTaskToken",
                actions=[
                    "states:SendTaskSuccess",
                    "states:SendTaskFailure",
                    "states:SendTaskHeartbeat",
                ],
                resources=["*"],
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="StartBarrierOnly",
                actions=["dynamodb:UpdateItem", "dynamodb:GetItem"],
                resources=[table.table_arn],
                conditions={
                    "ForAllValues:StringLike": {
                        "dynamodb:LeadingKeys": [f"{keys.BARRIER_PK_PREFIX}*"],
                        "dynamodb:Attributes": ["pk", "sk", "arrived", "parties", "release_us"],
                    }
                },
            )
        )
        self.role.add_to_policy(
            iam.PolicyStatement(
                sid="FindOwnVolume",
                actions=["ec2:DescribeVolumes"],
                resources=["*"],
            )
        )

        ack(
            self.role,
            "AwsSolutions-IAM5[Resource::*]",
            "SendTask* (task-token APIs) and ec2:DescribeVolumes support no resource-level permissions",
        )
        self.launch_template = ec2.LaunchTemplate(
            self,
            "LaunchTemplate",
            role=self.role,
            security_group=self.security_group,
            require_imdsv2=True,
            http_put_response_hop_limit=1,
            http_tokens=ec2.LaunchTemplateHttpTokens.REQUIRED,
            instance_initiated_shutdown_behavior=ec2.InstanceInitiatedShutdownBehavior.TERMINATE,
            block_devices=[
                ec2.BlockDevice(
                    device_name="/dev/sda1",
                    volume=ec2.BlockDeviceVolume.ebs(
                        30,
                        encrypted=True,
                        delete_on_termination=True,
                        volume_type=ec2.EbsDeviceVolumeType.GP3,
                    ),
                )
            ],
            detailed_monitoring=True,
            ebs_optimized=True,
        )
