// speedscope.mjs URL FILE...: opens each FILE (served under URL, beside speedscope's own
// release files) in speedscope, the viewer, in headless Chromium (SM_CHROMIUM, default
// /usr/bin/chromium), has it export what it read (its "Export" button: speedscope's own
// JSON), and prints one line per file: {"file", "title", "errors", "profiles": [{"name",
// "total"}], "frames": [names]}. Run by tests/integration/test_export.sh.
import { chromium } from 'playwright-core';
import fs from 'node:fs';

const [base, ...files] = process.argv.slice(2);
const browser = await chromium.launch({
  executablePath: process.env.SM_CHROMIUM || '/usr/bin/chromium',
  args: ['--no-sandbox'],
});
try {
  for (const f of files) {
    const ctx = await browser.newContext({ acceptDownloads: true });
    const page = await ctx.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/index.html#profileURL=${encodeURIComponent(`${base}/${f}`)}`);
    let out = { file: f, title: await page.title(), errors, profiles: [], frames: [] };
    try {
      const button = page.getByText('Export', { exact: false });
      await button.waitFor({ timeout: 15000 });
      const [dl] = await Promise.all([page.waitForEvent('download'), button.click()]);
      const d = JSON.parse(fs.readFileSync(await dl.path(), 'utf8'));
      out.title = await page.title();
      out.frames = d.shared.frames.map((x) => x.name).sort();
      out.profiles = d.profiles.map((p) => ({
        name: p.name,
        total: p.type === 'sampled' ? p.weights.reduce((a, b) => a + b, 0) : p.endValue - p.startValue,
      }));
    } catch (e) {
      errors.push(`no profile shown: ${e.message.split('\n')[0]}`);
    }
    console.log(JSON.stringify(out));
    await ctx.close();
  }
} finally {
  await browser.close();
}
