"""The demo's text tables: a support bot's topics (questions, answers, the passages that support
them, on-topic background), passages that match nothing, and the ways users phrase things.
Data only; ``sample`` turns it into rows."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["QA", "Topic", "TOPICS", "NOISE", "PREFIXES", "SUFFIXES", "FOLLOW_UPS"]


@dataclass(frozen=True)
class QA:
    questions: tuple[str, ...]
    answer: str
    support: tuple[str, ...]  # passages that state what the answer relies on


@dataclass(frozen=True)
class Topic:
    name: str
    qas: tuple[QA, ...]
    background: tuple[str, ...]  # on-topic but not answer-bearing


TOPICS: tuple[Topic, ...] = (
    Topic(
        "billing",
        (
            QA(
                (
                    "Why was I charged twice this month?",
                    "I see two charges on my card for the same invoice",
                    "duplicate charge on my credit card statement",
                ),
                "A duplicate charge is usually a pending authorization hold that the bank releases within "
                "3-5 business days; if both charges settle, billing support refunds the duplicate invoice.",
                (
                    "Pending authorization holds appear on a card statement like a charge but are released by "
                    "the bank within 3-5 business days.",
                    "If a duplicate charge settles, contact billing support with the invoice number and the "
                    "duplicate payment is refunded to the original card.",
                    "Each invoice is charged once; a second line for the same invoice amount is normally an "
                    "authorization hold, not a settled charge.",
                ),
            ),
            QA(
                (
                    "How do I update the credit card used for billing?",
                    "change payment method",
                    "where can I replace my expired card",
                ),
                "Open Settings > Billing > Payment method, click Replace card and enter the new card; the "
                "next invoice is charged to the new card automatically.",
                (
                    "To change the payment method, go to Settings > Billing > Payment method and click Replace card.",
                    "After you replace the card, the next invoice is charged to the new card automatically; "
                    "past invoices are not re-charged.",
                    "Expired cards are flagged on the Billing page seven days before the next invoice date.",
                ),
            ),
            QA(
                ("Can I get invoices with my company VAT number?", "add VAT ID to invoice", "tax number on invoices"),
                "Yes: add the VAT number under Settings > Billing > Tax details; it is printed on every "
                "invoice issued after you save it, and EU reverse charge is applied automatically.",
                (
                    "Company details and the VAT number are edited under Settings > Billing > Tax details.",
                    "A VAT number is printed on every invoice issued after it is saved; earlier invoices are "
                    "not reissued.",
                    "For EU customers with a valid VAT number, reverse charge is applied automatically.",
                ),
            ),
        ),
        (
            "Billing runs on the first day of each billing cycle in the account's time zone.",
            "Annual plans are billed up front and receive two months free compared with monthly billing.",
        ),
    ),
    Topic(
        "password_reset",
        (
            QA(
                ("I forgot my password, how do I reset it?", "reset password", "can't log in, forgot password"),
                "Click 'Forgot password' on the sign-in page and enter your email; the reset link is valid "
                "for 30 minutes and sets a new password after you confirm it.",
                (
                    "On the sign-in page, click 'Forgot password' and enter the email address of the account.",
                    "The password reset link expires after 30 minutes; request a new reset link if it expired.",
                    "After following the reset link, enter and confirm the new password to sign in.",
                ),
            ),
            QA(
                ("The password reset email never arrived", "no reset email received", "didn't get password reset link"),
                "Check the spam folder and that the email address matches the account; reset emails come "
                "from no-reply@acme.example and arrive within 5 minutes, otherwise ask support to resend.",
                (
                    "Password reset emails are sent from no-reply@acme.example and normally arrive within 5 minutes.",
                    "If the reset email did not arrive, check the spam folder and confirm the email address "
                    "matches the account.",
                    "Support can resend the password reset email after verifying the account owner.",
                ),
            ),
        ),
        (
            "Passwords must be at least 12 characters and cannot reuse the last five passwords.",
            "Admins can force a password reset for every member from the Security page.",
        ),
    ),
    Topic(
        "api_rate_limits",
        (
            QA(
                (
                    "What are the API rate limits?",
                    "how many requests per minute can I make",
                    "API throttling limits for my plan",
                ),
                "The API allows 600 requests per minute per token on the Standard plan and 3000 on "
                "Enterprise; exceeding it returns HTTP 429 with a Retry-After header.",
                (
                    "Rate limits are counted per API token: 600 requests per minute on Standard, 3000 "
                    "requests per minute on Enterprise.",
                    "A request over the rate limit gets HTTP 429 Too Many Requests with a Retry-After header "
                    "in seconds.",
                    "The X-RateLimit-Remaining header shows how many requests are left in the current minute.",
                ),
            ),
            QA(
                (
                    "I keep getting 429 errors from the API",
                    "HTTP 429 Too Many Requests",
                    "how to handle rate limit errors",
                ),
                "A 429 means the token exceeded its per-minute rate limit: wait for the Retry-After seconds "
                "and retry with exponential backoff, or spread requests across the minute.",
                (
                    "HTTP 429 is returned when a token exceeds its per-minute rate limit.",
                    "Clients should honour the Retry-After header and retry with exponential backoff and jitter.",
                    "Batch endpoints count as one request and help stay under the rate limit.",
                ),
            ),
        ),
        (
            "API tokens are created under Settings > Developer > Tokens and can be scoped per project.",
            "The API is versioned by date; pin a version with the Api-Version header.",
        ),
    ),
    Topic(
        "refunds",
        (
            QA(
                ("Can I get a refund?", "refund policy", "I want my money back for the annual plan"),
                "Monthly plans can be refunded within 14 days of the charge and annual plans within 30 "
                "days; refunds go back to the original payment method within 5-10 business days.",
                (
                    "Refunds are available within 14 days of a monthly charge and within 30 days of an annual charge.",
                    "Refunds are returned to the original payment method and take 5-10 business days to appear.",
                    "To request a refund, open the invoice and choose Request refund, or contact billing support.",
                ),
            ),
            QA(
                ("How long does a refund take to show up?", "refund not received yet", "when will I see my refund"),
                "Once approved, a refund reaches the original payment method in 5-10 business days; the "
                "invoice shows status Refunded as soon as it is approved.",
                (
                    "Approved refunds reach the original payment method in 5-10 business days, depending on the bank.",
                    "An invoice shows the status Refunded as soon as the refund is approved.",
                ),
            ),
        ),
        (
            "Credits from downgrades are kept on the account and applied to the next invoice.",
            "Refunds are not available for usage-based overage charges.",
        ),
    ),
    Topic(
        "shipping",
        (
            QA(
                ("When will my order ship?", "shipping time for hardware orders", "delivery estimate"),
                "Hardware orders ship within 2 business days from our warehouse; standard delivery takes "
                "3-5 business days and express delivery 1-2 business days.",
                (
                    "Hardware orders leave the warehouse within 2 business days of payment.",
                    "Standard delivery takes 3-5 business days; express delivery takes 1-2 business days.",
                    "A tracking number is emailed as soon as the order ships from the warehouse.",
                ),
            ),
            QA(
                ("Do you ship internationally?", "international shipping", "can you deliver to Canada"),
                "Yes, we ship to 40 countries; international delivery takes 7-14 business days and "
                "customs duties are paid by the recipient.",
                (
                    "We ship hardware to 40 countries; the checkout lists every supported country.",
                    "International delivery takes 7-14 business days depending on customs.",
                    "Customs duties and import taxes on international orders are paid by the recipient.",
                ),
            ),
        ),
        (
            "Orders can be cancelled free of charge until they ship.",
            "Returned hardware must be in its original packaging.",
        ),
    ),
    Topic(
        "sso",
        (
            QA(
                ("How do I set up SAML single sign-on?", "configure SSO with Okta", "SAML SSO setup"),
                "On the Enterprise plan, open Settings > Security > SSO, upload your identity provider's "
                "SAML metadata XML and map the email attribute; then test the SSO login before enforcing it.",
                (
                    "SAML single sign-on is available on the Enterprise plan under Settings > Security > SSO.",
                    "Upload the identity provider's SAML metadata XML (Okta, Azure AD, Google) and map the "
                    "email attribute.",
                    "Use Test SSO login to check the SAML configuration before enforcing SSO for all members.",
                ),
            ),
            QA(
                (
                    "SSO login fails with an invalid signature error",
                    "SAML invalid signature",
                    "Okta SSO error after certificate rotation",
                ),
                "An invalid signature error means the identity provider's signing certificate changed: "
                "upload the new SAML metadata XML or certificate under Settings > Security > SSO.",
                (
                    "'Invalid signature' during SAML SSO means the response was signed with a certificate we "
                    "do not have.",
                    "After the identity provider rotates its signing certificate, upload the new SAML metadata "
                    "XML under Settings > Security > SSO.",
                ),
            ),
        ),
        (
            "SCIM provisioning creates and removes members automatically from your identity provider.",
            "Guests cannot sign in with SSO and keep using email and password.",
        ),
    ),
    Topic(
        "data_export",
        (
            QA(
                ("How do I export all my data?", "export account data", "download a full data export"),
                "Admins can start a full export under Settings > Data > Export; the archive of CSV and "
                "JSON files is emailed as a download link valid for 7 days.",
                (
                    "A full data export is started by an admin from Settings > Data > Export.",
                    "The export archive contains CSV and JSON files for every project.",
                    "When the export is ready, a download link is emailed; the link is valid for 7 days.",
                ),
            ),
            QA(
                (
                    "Can I schedule a recurring export to S3?",
                    "automatic export to S3 bucket",
                    "nightly export to our data warehouse",
                ),
                "Yes, on Enterprise you can schedule a daily or weekly export to an S3 bucket under "
                "Settings > Data > Scheduled exports, using a bucket policy that grants our role write access.",
                (
                    "Scheduled exports run daily or weekly and write to an S3 bucket you own.",
                    "Configure scheduled exports under Settings > Data > Scheduled exports on the Enterprise plan.",
                    "The S3 bucket policy must grant our export role write access to the bucket.",
                ),
            ),
        ),
        (
            "Deleted projects are kept for 30 days and can be restored by an admin.",
            "Exports never include API tokens or passwords.",
        ),
    ),
    Topic(
        "two_factor",
        (
            QA(
                ("How do I enable two-factor authentication?", "turn on 2FA", "set up an authenticator app"),
                "Go to Profile > Security > Two-factor authentication, scan the QR code with an "
                "authenticator app and enter the 6-digit code; save the recovery codes shown afterwards.",
                (
                    "Two-factor authentication is enabled under Profile > Security > Two-factor authentication.",
                    "Scan the QR code with an authenticator app and confirm with the 6-digit code.",
                    "After enabling two-factor authentication, store the ten recovery codes somewhere safe.",
                ),
            ),
            QA(
                (
                    "I lost my phone and can't get my 2FA code",
                    "lost authenticator device",
                    "locked out by two-factor authentication",
                ),
                "Sign in with one of your recovery codes and re-enroll the authenticator app; without "
                "recovery codes an admin or support must reset two-factor authentication after verifying you.",
                (
                    "Each recovery code can be used once instead of the 6-digit authenticator code.",
                    "After signing in with a recovery code, re-enroll two-factor authentication on the new phone.",
                    "Without recovery codes, an admin or support resets two-factor authentication after "
                    "verifying the account owner.",
                ),
            ),
        ),
        (
            "Admins can require two-factor authentication for every member of the workspace.",
            "SMS codes are not supported; use an authenticator app or a security key.",
        ),
    ),
    Topic(
        "webhooks",
        (
            QA(
                ("How do I verify webhook signatures?", "validate webhook payload", "webhook signature header"),
                "Each webhook carries an X-Signature header: compute the HMAC-SHA256 of the raw request "
                "body with your webhook secret and compare it in constant time.",
                (
                    "Every webhook request includes an X-Signature header with an HMAC-SHA256 signature.",
                    "Compute HMAC-SHA256 over the raw request body using the webhook secret and compare in "
                    "constant time.",
                    "The webhook secret is shown once when the webhook endpoint is created.",
                ),
            ),
            QA(
                ("Why are my webhooks not being delivered?", "webhook retries", "missing webhook events"),
                "Webhooks are retried for 24 hours with exponential backoff when your endpoint does not "
                "answer 2xx within 10 seconds; after that the endpoint is disabled and admins are emailed.",
                (
                    "A webhook delivery succeeds when the endpoint answers 2xx within 10 seconds.",
                    "Failed webhook deliveries are retried with exponential backoff for 24 hours.",
                    "An endpoint that keeps failing for 24 hours is disabled and admins receive an email.",
                ),
            ),
        ),
        (
            "Webhook events are listed under Settings > Developer > Webhooks with their payload schema.",
            "Event ordering is not guaranteed; use the event timestamp.",
        ),
    ),
    Topic(
        "account_deletion",
        (
            QA(
                ("How do I delete my account?", "close my account permanently", "remove account and data"),
                "The account owner can delete the account under Settings > Account > Delete account; data "
                "is kept for 30 days in case you change your mind and then permanently erased.",
                (
                    "Only the account owner can delete the account, from Settings > Account > Delete account.",
                    "After deletion, data is kept for 30 days and can be restored, then it is permanently erased.",
                    "Cancel the subscription before deleting the account to avoid another invoice.",
                ),
            ),
        ),
        (
            "Members can leave a workspace at any time without deleting their personal account.",
            "Deleting an account does not delete exported files you already downloaded.",
        ),
    ),
)

#: passages that match nothing (what a weak retriever also returns)
NOISE = (
    "Our offices are closed on public holidays; the status page lists planned maintenance.",
    "Welcome to the help center! Browse the categories on the left to get started.",
    "The mobile app is available for iOS 16 and Android 12 or later.",
    "Release notes are published every Tuesday on the company blog.",
    "Keyboard shortcuts: press ? anywhere in the app to see the full list.",
    "Dark mode can be enabled from the appearance menu in your profile.",
)

PREFIXES = ("", "", "", "Hi, ", "Hello! ", "Quick question: ", "Urgent: ", "hey - ")
SUFFIXES = ("", "", "", "?", " thanks", " - please help", " (asking for my team)")
FOLLOW_UPS = (
    "And what if that doesn't work?",
    "Thanks. Is there anything else I should know?",
    "Ok, where exactly do I find that?",
    "Does this apply to the Enterprise plan too?",
)
