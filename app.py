"""CDK app entry point (placeholder until the AWS stack lands)."""
