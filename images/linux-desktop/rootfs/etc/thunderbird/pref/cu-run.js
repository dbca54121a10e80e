// Thunderbird with no network: no account wizard, no default-client question, no start page,
// no telemetry, no update or rights notices. The profile (~/.thunderbird) has Local Folders.
pref("mail.provider.suppress_dialog_on_startup", true);
pref("mail.shell.checkDefaultClient", false);
pref("mailnews.start_page.enabled", false);
pref("mail.rights.version", 1);
pref("mail.spotlight.firstRunDone", true);
pref("datareporting.policy.dataSubmissionEnabled", false);
pref("datareporting.healthreport.uploadEnabled", false);
pref("toolkit.telemetry.enabled", false);
pref("toolkit.telemetry.reportingpolicy.firstRun", false);
pref("app.update.enabled", false);
pref("app.update.auto", false);
pref("browser.startup.homepage_override.mstone", "ignore");
pref("mailnews.auto_config_url", "");
pref("mail.inappnotifications.enabled", false);
