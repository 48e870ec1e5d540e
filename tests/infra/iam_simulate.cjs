// Evaluate IAM identity policies for concrete requests with @cloud-copilot/iam-simulate
// (package.json pins it). stdin: {"policies": [doc, ...], "requests": [{"principal",
// "action", "resource", "account", "context": {...}}]}; stdout: one decision per request
// ("Allowed", "ImplicitlyDenied", "ExplicitlyDenied"), or the simulator's errors.
const { runSimulation } = require('@cloud-copilot/iam-simulate')

async function main() {
  let input = ''
  for await (const chunk of process.stdin) input += chunk
  const { policies, requests } = JSON.parse(input)
  const out = []
  for (const r of requests) {
    const response = await runSimulation(
      {
        request: {
          principal: r.principal,
          action: r.action,
          resource: { resource: r.resource, accountId: r.account },
          contextVariables: r.context
        },
        identityPolicies: policies.map((policy, i) => ({ name: `policy${i}`, policy })),
        serviceControlPolicies: [],
        resourceControlPolicies: []
      },
      {}
    )
    out.push(response.errors ? { errors: response.errors } : response.result.analysis.result)
  }
  process.stdout.write(JSON.stringify(out))
}

main().catch((e) => {
  process.stderr.write(String(e && e.stack ? e.stack : e))
  process.exit(1)
})
