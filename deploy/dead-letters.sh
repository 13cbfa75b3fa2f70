#!/usr/bin/env bash
# Gives each function trigger's Pub/Sub subscription its dead-letter topic.
#
# Eventarc creates the subscription of a Pub/Sub-triggered function itself
# (eventarc-REGION-TRIGGER-sub-N) and Terraform cannot address it, so the
# dead-letter policy is set on it after `terraform apply`, here. Idempotent:
# run it after every apply (cloudbuild.yaml does).
#
# usage: deploy/dead-letters.sh ROUTES_FILE
#   ROUTES_FILE holds `terraform output -raw eventarc_dead_letters`: one line
#   per trigger, "TRIGGER DEAD_LETTER_TOPIC MAX_DELIVERY_ATTEMPTS AGENT", with
#   TRIGGER = projects/P/locations/R/triggers/T,
#   DEAD_LETTER_TOPIC = projects/P/topics/X-dead-letter and
#   AGENT = serviceAccount:service-NUMBER@gcp-sa-pubsub.DOMAIN.
# Needs gcloud with eventarc.triggers.get, pubsub.subscriptions.update and
# pubsub.subscriptions.setIamPolicy (README.md, "Who deploys").
set -euo pipefail

routes=${1:?usage: deploy/dead-letters.sh ROUTES_FILE}
n=0
while read -r trigger topic attempts agent; do
	[[ -z "$trigger" ]] && continue
	if [[ ! "$trigger" =~ ^projects/([^/]+)/locations/([^/]+)/triggers/([^/]+)$ ]]; then
		echo "dead-letters.sh: not a trigger name: $trigger" >&2
		exit 1
	fi
	project=${BASH_REMATCH[1]} location=${BASH_REMATCH[2]} name=${BASH_REMATCH[3]}
	sub=$(gcloud eventarc triggers describe "$name" --project="$project" --location="$location" \
		--format='value(transport.pubsub.subscription)')
	if [[ -z "$sub" ]]; then
		echo "dead-letters.sh: trigger $trigger has no Pub/Sub subscription" >&2
		exit 1
	fi
	# The Pub/Sub service agent acknowledges on the source subscription what
	# it forwards (publishing to the dead-letter topic is granted by
	# Terraform).
	gcloud pubsub subscriptions add-iam-policy-binding "$sub" \
		--member="$agent" --role=roles/pubsub.subscriber --quiet >/dev/null
	gcloud pubsub subscriptions update "$sub" \
		--dead-letter-topic="$topic" --max-delivery-attempts="$attempts" --quiet
	echo "$sub → $topic after $attempts attempts"
	n=$((n + 1))
done <"$routes"
if [[ $n -eq 0 ]]; then
	echo "dead-letters.sh: no trigger in $routes" >&2
	exit 1
fi
