import time
from datetime import timedelta
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from accounts.services import users_with_tokens_create


class Command(BaseCommand):
    help = "Create N load-test users with one bearer token each and write 'username token' lines to a file."

    def add_arguments(self, parser):
        parser.add_argument("--count", type=int, required=True, help="How many users (1 to 100000).")
        parser.add_argument("--out", type=Path, required=True, help="File to write 'username token' lines to.")
        parser.add_argument("--prefix", default="load", help="Username prefix (default: load).")
        parser.add_argument(
            "--staff", action="store_true", help="Make the users staff (the restock scenario: with --permission)."
        )
        parser.add_argument(
            "--permission",
            action="append",
            default=[],
            metavar="APP.CODENAME",
            help="Give the users this model permission; repeat for more. A staff call needs its own, "
            "as in the admin: the restock scenario's PATCH /api/admin/vouchers/{id} needs orders.change_voucher.",
        )
        parser.add_argument(
            "--ttl", type=int, default=None, help="Seconds the tokens work (default: API_TOKEN_TTL_SECONDS)."
        )

    def handle(
        self,
        *args,
        count: int,
        out: Path,
        prefix: str,
        staff: bool = False,
        permission: list[str] | None = None,
        ttl: int | None = None,
        **options,
    ):
        if not 1 <= count <= 100_000:
            raise CommandError("--count must be between 1 and 100000.")
        if ttl is not None and ttl < 1:
            raise CommandError("--ttl must be at least 1 second.")
        if out.parent and not out.parent.exists():
            raise CommandError(f"Folder {out.parent} does not exist.")
        started = time.perf_counter()
        try:
            pairs = users_with_tokens_create(
                count=count,
                prefix=prefix,
                staff=staff,
                permissions=permission or (),
                ttl=None if ttl is None else timedelta(seconds=ttl),
            )
        except ValueError as exc:  # a permission that does not exist
            raise CommandError(str(exc)) from None
        out.write_text("".join(f"{username} {token}\n" for username, token in pairs))
        self.stdout.write(f"Wrote {len(pairs)} tokens to {out} in {time.perf_counter() - started:.1f}s.")
