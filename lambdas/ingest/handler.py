"""placeholder"""

def handler(event, context):
    return {}
