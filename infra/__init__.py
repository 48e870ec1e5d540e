"""CDK app for iofleet: a thin stack composing one construct per concern."""
